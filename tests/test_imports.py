"""The module graph: no import cycle among ``sweep`` modules, function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sweep"


def module_names() -> dict[str, Path]:
    root = PACKAGE.parent
    return {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in PACKAGE.rglob("*.py")
    }


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every ``sweep`` module ``name`` imports anywhere in its body (``if TYPE_CHECKING:`` blocks excepted)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            subs = {f"{base}.{alias.name}" for alias in node.names}
            # `from pkg import mod` depends on the module `pkg.mod`; `from pkg import name` on the package `pkg`
            found |= (subs & known) or {base}
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path per module that reaches itself."""
    out = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    out.append([*path, start])
                    stack.clear()
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return out


def test_the_finder_sees_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"], ["b", "c", "a", "b"], ["c", "a", "b", "c"]]
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\ndef f():\n    import y\n")
    assert imports("m", source, {"x", "y"}) == {"y"}


def test_no_import_cycle_among_sweep_modules() -> None:
    modules = module_names()
    graph = {name: imports(name, path, set(modules)) for name, path in modules.items()}
    assert "sweep.contract" in graph["sweep.planner.loop"] and "sweep.trial" not in graph["sweep.planner.loop"]
    assert cycles(graph) == []


def test_the_planner_side_does_not_load_the_trial_stack() -> None:
    """Planner, space and scheduler speak to trials through ``contract`` only."""
    import subprocess
    import sys

    code = "import sys, sweep.planner.loop, sweep.planner.space, sweep.planner.pruner; print(sorted(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("'sweep.trial.runner'", "'sweep.trial.learner'", "'sweep.trial.cli'"):
        assert heavy not in loaded, heavy


#: The layers, highest first: a module may import its own package and anything in a lower layer, never a higher one;
#: the packages of one layer never import each other. A name is a module or a package (all its modules).
LAYERS: list[tuple[str, ...]] = [
    ("sweep.run", "sweep.export", "sweep.init", "sweep.__main__"),  # the entry points
    ("sweep.report",),  # outputs: read the ledger and the study
    ("sweep.planner", "sweep.execution"),  # the driver: proposes and prunes / runs trials on workers
    ("sweep.trial",),  # a worker's trial
    ("sweep.config", "sweep.analysis"),  # the run's configuration / what a ledger says
    ("sweep.backends",),  # the simulators
    ("sweep.perf.apply", "sweep.perf.ppo"),  # where flags act on a trial (torch)
    ("sweep.perf.graphs", "sweep.perf.stats"),
    ("sweep.params", "sweep.ledger"),
    ("sweep.perf", "sweep.checkpoints", "sweep.prices", "sweep.cli", "sweep.runlock"),  # sweep.perf: the catalog
    ("sweep.contract",),
    ("sweep.record",),  # the ledger's row, its reader and writer: what crosses every boundary
    ("sweep.faults", "sweep.stops", "sweep.deps"),  # kill points, stop signals, the dependency check
    ("sweep.errors",),
]


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the layer entry holding ``module``): the longest entry that is the module or its package."""
    found = [(len(name), i, name) for i, layer in enumerate(LAYERS) for name in layer
             if module == name or module.startswith(name + ".")]  # fmt: skip
    assert found, f"{module} is in no layer: add it to LAYERS"
    _, i, name = max(found)
    return i, name


def test_every_import_goes_down_the_layers() -> None:
    modules = module_names()
    bad = []
    for name, path in modules.items():
        if name == "sweep":
            continue
        mine, entry = layer_of(name)
        for dep in imports(name, path, set(modules)):
            if dep == "sweep":
                continue
            theirs, their_entry = layer_of(dep)
            if theirs < mine or (theirs == mine and their_entry != entry):
                bad.append(f"{name} ({entry}) imports {dep} ({their_entry})")
    assert not bad, "\n".join(bad)


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer_of("sweep.contract")[0] > layer_of("sweep.trial.runner")[0]
    assert layer_of("sweep.perf.catalog")[1] == "sweep.perf" and layer_of("sweep.perf.ppo")[1] == "sweep.perf.ppo"


def test_the_contract_is_a_leaf_without_torch() -> None:
    import subprocess
    import sys

    code = "import sys, sweep.contract; print(sorted(m for m in sys.modules if m.startswith(('sweep', 'torch'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['sweep', 'sweep.contract', 'sweep.errors', 'sweep.record']", loaded


def test_a_bad_command_line_is_refused_without_importing_torch(tmp_path) -> None:
    # on a machine whose torch has no GPU support (this one's, where it holds), sweep.run and sweep.trial say their
    # one line about a bad value without paying for torch
    import subprocess
    import sys

    from sweep.deps import torch_sees_gpu

    if torch_sees_gpu():
        pytest.skip("torch sees a GPU here: it is imported to ask")
    code = (
        "import sys, functools\n"
        "from sweep.cli import run_main\n"
        "from sweep.run import main as run\n"
        "from sweep.trial.__main__ import main as trial, run_any\n"
        "for main, argv in ((run, ['space=locomotion', 'budget.usd=-1']), (functools.partial(trial, run=run_any),"
        " ['num_env=64'])):\n"
        "    try:\n"
        "        run_main(main, argv)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 2, exc.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'jax', 'rsl_rl', 'mujoco')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout
    assert proc.stderr.count("error:") == 2, proc.stderr
