"""Every key of the run config refuses what it cannot mean: values drawn for each key, from the space file and from
the command line, either start a run or stop it with exit status 2 and one line naming the key, writing nothing;
a run folder is always inside the folder the user chose."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from sweep import perf
from sweep import run as run_mod
from sweep.cli import run_main
from sweep.config import RunConfig

GOOD = {
    "backend": "mjx_locomotion",
    "profile": "cpu",
    "device": "cpu",
    "knobs": {"num_envs": [64, 128], "num_steps_per_env": [8, 16], "flags": {"fused_optimizer": [False, True]}},
    "budget": {"usd": 1.0, "trial_usd": 0.2, "max_trials": 4},
    "price": {"gpu": "cpu"},
    "workers": {"num": 1, "cpus_per_trial": 1},
}


def schema_keys(schema: type = RunConfig, prefix: str = "") -> list[str]:
    """Every dotted key of the schema, sections and their fields, and each catalog flag under the flag maps."""
    keys = []
    for f in dataclasses.fields(schema):
        key = f"{prefix}{f.name}"
        keys.append(key)
        if isinstance(f.default_factory, type) and dataclasses.is_dataclass(f.default_factory):
            keys += schema_keys(f.default_factory, f"{key}.")
        if f.name == "flags":
            keys += [f"{key}.{name}" for name in perf.CATALOG]
    return keys


KEYS = schema_keys()

#: Strings a user (or a typo) can give: empty, blank, path-like, escaping, huge, YAML-special.
STRINGS = ["", " ", ".", "..", "/", "../x", "../../etc", "/tmp/elsewhere", "a/b", "~", "x" * 300, "auto", "cpu",
           "cuda", "null", "true", "1e3", "-1", "space.yaml", "a b"]  # fmt: skip
NUMBERS = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, float("nan"), float("inf"), float("-inf")]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.sampled_from(STRINGS), st.text(max_size=12))
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.dictionaries(st.sampled_from(["num_envs", "usd", "a", "flags.fused_optimizer"]), SCALARS, max_size=2),
)
#: What the command line can carry: text, read as YAML by the parser.
RAW = st.one_of(
    st.sampled_from([*STRINGS, ".nan", ".inf", "-.inf", "[]", "{}", "[1, 2]", "[.nan]", "[-5]", "{a: 1}", "[[1]]"]),
    NUMBERS.map(str),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=16),
)


class Started(Exception):
    """Raised where the run would start its workers: every check passed."""


def set_key(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with dotted ``key`` set to ``value`` (sections made where missing)."""
    out = yaml.safe_load(yaml.safe_dump(data))
    node = out
    *parents, last = key.split(".")
    for name in parents:
        if not isinstance(node.get(name), dict):
            node[name] = {}
        node = node[name]
    node[last] = value
    return out


def attempt(argv: list[str]) -> tuple[int, str, Path | None]:
    """The main command up to the start of its workers: (exit status, stderr, the run folder it made or None)."""
    made: list[Path] = []
    make_run_dir = run_mod.make_run_dir

    def record(cfg: Any, run_dir: Path) -> None:
        make_run_dir(cfg, run_dir)
        made.append(run_dir)

    def start_workers(*args: Any, **kwargs: Any) -> None:
        raise Started

    err = io.StringIO()
    with (
        mock.patch.object(run_mod, "make_run_dir", record),
        mock.patch("sweep.execution.workers.WorkerPool", start_workers),
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        try:
            run_main(run_mod.main, argv)
        except SystemExit as exc:
            return int(exc.code or 0), err.getvalue(), None
        except Started:
            return 0, err.getvalue(), made[0]
    raise AssertionError("the run neither started nor exited")


def named(line: str, key: str) -> bool:
    """Whether the error line names ``key``, a section holding it, or a key inside it."""
    parts = key.split(".")
    return any(".".join(parts[: i + 1]) in line for i in range(len(parts)))


def check(key: str, argv: list[str]) -> None:
    """Run ``argv`` (plus a good space file and an ``out`` where not given) from a folder three levels inside a
    fresh one, so that relative paths stay inside it."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp) / "a" / "b" / "c"
        cwd.mkdir(parents=True)
        base = Path(tmp) / "space.yaml"
        base.write_text(yaml.safe_dump(GOOD))
        argv = ([] if any(a.startswith("space=") for a in argv) else [f"space={base}"]) + argv
        argv += [] if any(a.startswith("out=") for a in argv) else [f"out={Path(tmp) / 'chosen'}"]
        before = set(Path(tmp).rglob("*"))
        with contextlib.chdir(cwd):
            code, err, run_dir = attempt(argv)
            chosen = Path(next(a for a in argv if a.startswith("out="))[4:]).resolve()
            run_dir = run_dir.resolve() if run_dir else None
        if code == 0:
            assert run_dir is not None and run_dir.parent == chosen, f"{key}: run folder {run_dir} not in {chosen}"
            return
        lines = err.strip().splitlines()
        assert code == 2, (key, argv, err)
        assert len(lines) == 1 and lines[0].startswith("error: "), (key, argv, lines)
        assert named(lines[0], key), (key, argv, lines[0])
        left = set(Path(tmp).rglob("*")) - before
        assert not left, (key, argv, left)


SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def _gpu_free(monkeypatch) -> None:
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)


@pytest.mark.slow
@SETTINGS
@given(key=st.sampled_from(KEYS), value=VALUES)
def test_a_value_in_the_space_file_starts_the_run_or_is_refused_in_one_line(key: str, value: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "drawn.yaml"
        path.write_text(yaml.safe_dump(set_key(GOOD, key, value)))
        check(key, [f"space={path}"])


@pytest.mark.slow
@SETTINGS
@given(key=st.sampled_from(KEYS), raw=RAW)
@example(key="out", raw="00")  # a folder named 00, not the number 0
@example(key="out", raw="x" * 300)  # a name the filesystem refuses
@example(key="space", raw="x" * 300)
@example(key="search.prior", raw="x" * 300)  # a run folder the filesystem refuses to look up
def test_a_value_on_the_command_line_starts_the_run_or_is_refused_in_one_line(key: str, raw: str) -> None:
    assume(not (key == "out" and raw.strip().startswith(("/", "~"))))  # a folder outside this test's own
    check(key, [f"{key}={raw}"])


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(run_id=st.one_of(st.sampled_from(STRINGS), st.text(max_size=20)))
def test_no_run_id_places_the_run_folder_outside_the_chosen_folder(run_id: str) -> None:
    check("run_id", [f"run_id={run_id}"])


@pytest.mark.parametrize("run_id", ["../x", "a/b", "/tmp/elsewhere", "..", ".hidden"])
def test_sweep_trial_refuses_a_run_id_that_is_not_a_folder_name(run_id: str, tmp_path: Path, capsys) -> None:
    from sweep.trial.cli import main as trial_main
    from sweep.trial.runner import run_trial

    with contextlib.chdir(tmp_path), pytest.raises(SystemExit) as exit_info:
        run_main(lambda argv: trial_main(argv, run=run_trial), [f"run_id={run_id}"])
    assert exit_info.value.code == 2 and "run_id" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
