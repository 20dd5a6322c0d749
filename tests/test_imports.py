"""The module graph: no import cycle among ``sweep`` modules, function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

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
