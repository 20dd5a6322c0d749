"""Kill the driver of a real study at random named points, resume after each kill, and check that nothing is lost.

A real study (the embedded MJX task's small CPU profile, two real Ray actors, the real Optuna storage) is started and
killed with SIGKILL at a point a seeded generator picks (``SWEEP_FAULT=<point>:<n>``, :mod:`sweep.faults`): in the
search, the confirmation and the report, and in the middle of a resume closing what the last kill left; it is then
resumed, with the next point armed. Twice, two drivers are started on the folder at once. After every driver it
checks what must hold at any instant, and at the end (a last resume with nothing armed) that the study ended whole:

- the ledger's earlier bytes are unchanged (a torn last line is moved to ``ledger.jsonl.torn``, not lost); no row
  is written twice; every trial has at most one end row, and at the end every trial that started has exactly one;
- Optuna's trial states agree with the ledger: each end row's state is the trial's ``state`` attribute and the
  Optuna state it is told as; a trial Optuna holds as running has no end row, except the one whose end row was
  fsynced just before a kill (told on resume);
- a trial killed with its driver is billed at least up to that driver's last heartbeat before the kill (read from
  its lock) and no later than the kill; one that was never sent to a worker is billed nothing; the study's spend
  never goes down;
- of two drivers started at once, exactly one runs and the other exits 2 with one ``error:`` line naming the holder.

    python benchmarks/kill_soak.py --points 60 --seed 3 --out /tmp/soak      # a longer soak than the test's

It prints each driver's point, exit status and seconds, and ends with the kills per point; any failed check raises
with the cycle, the point and the driver's stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: A compile cache shared by every driver's workers, so each env shape compiles once (as the tests' conftest sets).
CACHE_ENV = {
    "JAX_COMPILATION_CACHE_DIR": "/tmp/sweep-kill-soak-jax-cache",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}
sys.path.insert(0, str(ROOT))

from sweep import runlock  # noqa: E402
from sweep.ledger import LedgerView, metrics, read_rows  # noqa: E402
from sweep.record import EndCause, TrialState  # noqa: E402

#: A real study small enough for 2 CPU cores: 4 configs of the MJX task's CPU profile, a lenient target, a held-out
#: pass every few iterations, two workers, then a confirmation (the best config and the baseline on one more seed).
SPACE: dict[str, Any] = {
    "backend": "mjx_locomotion",
    "profile": "cpu",
    "device": "cpu",
    "knobs": {
        "num_envs": [32, 64],
        "num_steps_per_env": [8, 16],
        "num_mini_batches": [2],
        "flags": {"compile_cache": [True]},
    },
    "target": {"success": 0.6, "eval_episodes": 16, "eval_every_steps": 32, "eval_gate": 0},
    "budget": {"usd": 100000.0, "trial_usd": 120.0, "max_trials": 400},  # killed trials count too
    "price": {"gpu": "custom", "usd_per_hour": 3600.0},
    "workers": {"num": 2, "cpus_per_trial": 1},
    "search": {"intensify": 1, "initial": [{"num_envs": 64, "num_steps_per_env": 16}]},
    "confirm": {"seeds": 2, "top": 1, "budget_share": 0.3, "baseline": {"num_envs": 64, "num_steps_per_env": 16}},
}

#: Points by phase of the study, each with the range its count is drawn from (small: each fires soon after start).
SEARCH = {
    **{"lock": (1, 1), "lock.beat": (1, 2), "lock.takeover": (1, 1), "dispatch": (1, 3), "checkpoint": (1, 6)},
    **{"ledger.write": (1, 6), "ledger.torn": (1, 6), "ledger.synced": (1, 6), "tell": (1, 3), "orphans": (1, 2)},
}
CONFIRM = {
    **{"confirm": (1, 2), "dispatch": (1, 2), "checkpoint": (1, 4), "tell": (1, 2), "orphans": (1, 2)},
    **{"ledger.write": (1, 3), "ledger.torn": (1, 3), "ledger.synced": (1, 3)},
}
OVER = {"report": (1, 3), "lock": (1, 1), "lock.beat": (1, 1), "lock.takeover": (1, 1)}
#: Points each phase kills at first (in a seeded order), before its others: a tell, a ledger write, a checkpoint.
FIRST = ("tell", "checkpoint", "ledger.write", "ledger.torn", "ledger.synced")
#: Share of the kills in the search and in the confirmation (the rest after the study ended).
SEARCH_SHARE, CONFIRM_SHARE = 0.5, 0.25
#: Seconds a driver may take before the soak gives up on it.
DRIVER_TIMEOUT_S = 420.0

#: How Optuna may be told each end (state, cause): a trial stopped at the study's end is told its cost when it sent
#: its own end row, FAIL when the planner closed it (Ctrl-C, a lost worker or driver).
TOLD = {
    (TrialState.REACHED, EndCause.REACHED): {"COMPLETE"},
    (TrialState.PRUNED, EndCause.PRUNED): {"PRUNED"},
    (TrialState.PRUNED, EndCause.NOT_RUN): {"PRUNED"},
    (TrialState.CAPPED, EndCause.CAP): {"COMPLETE"},
    (TrialState.CAPPED, EndCause.RACE_CAP): {"COMPLETE"},
    (TrialState.CAPPED, EndCause.STUDY_END): {"COMPLETE", "FAIL"},
    (TrialState.FAILED, EndCause.FAILED): {"COMPLETE"},
    (TrialState.FAILED, EndCause.WORKER_LOST): {"FAIL"},
    (TrialState.FAILED, EndCause.DRIVER_STOPPED): {"FAIL"},
}


#: The run folder's outputs, each with what a whole one looks like (a kill mid-write must leave the previous one).
WHOLE = {
    "config.yaml": lambda text: "budget" in (yaml.safe_load(text) or {}),
    "recommended.yaml": lambda text: "knobs" in (yaml.safe_load(text) or {}),
    "report.html": lambda text: text.rstrip().endswith("</html>"),
}


class SoakFailure(AssertionError):
    """A check failed: the message says the cycle, the point and what broke."""


@dataclass
class Killed:
    """A trial left running by a killed driver, and the bounds of its bill from what was on disk at the kill."""

    trial: int
    least_s: float
    most_s: float
    dispatched: bool


@dataclass
class Soak:
    """The state of one soak: its folder, the kills so far and what each left to be billed."""

    out: Path
    run_id: str = "soak"
    rng: random.Random = field(default_factory=random.Random)
    phase: str = "search"
    cycle: int = 0
    kills: Counter = field(default_factory=Counter)
    queue: dict[str, list[str]] = field(default_factory=dict)
    """Per phase, its points still to kill at before any repeats (a seeded order)."""
    killed: dict[int, Killed] = field(default_factory=dict)
    spent_usd: float = 0.0
    log: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.out / self.run_id

    def argv(self) -> list[str]:
        if (self.run_dir / "study.db").exists():
            return [f"resume={self.run_dir}"]
        return [f"space={self.out / 'space.yaml'}", f"run_id={self.run_id}", f"out={self.out}"]

    def launch(self, fault: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "sweep.run", *self.argv()],
            cwd=self.out,
            env={**os.environ, "PYTHONPATH": str(ROOT), **self.env, "SWEEP_FAULT": fault},
            start_new_session=True,  # the driver's Ray processes with it, for the sweep after it exits
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def fail(self, fault: str, what: str, err: str = "") -> SoakFailure:
        tail = f"; the driver's stderr ends: {err[-3000:]}" if err else ""
        return SoakFailure(f"cycle {self.cycle} ({fault}): {what}{tail}")


def wait(proc: subprocess.Popen, soak: Soak, fault: str) -> tuple[int, str, float]:
    """(exit status, stderr, when it was seen exiting) of a driver; then every process of its session is killed."""
    try:
        _, err = proc.communicate(timeout=DRIVER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        raise soak.fail(fault, f"the driver ran for more than {DRIVER_TIMEOUT_S:g} s", err) from None
    seen = time.time()
    with contextlib.suppress(ProcessLookupError):  # Ray's processes die with the driver; any straggler goes now
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err, seen


def choose(soak: Soak, points: int) -> str:
    """The next fault: a point of the study's phase while that phase's share of the kills lasts (every point of the
    phase in a seeded order, then again), else the first point of the next phase (the driver runs on to it)."""
    done = sum(soak.kills.values())
    lock_left = (soak.run_dir / runlock.LOCK_FILE).exists()  # a killed driver's: the next one takes it over
    orphans = len(running_trials(soak.run_dir)) if (soak.run_dir / "study.db").exists() else 0
    if soak.phase == "search" and any(r.phase == "confirm" for r in read_rows(soak.run_dir / "ledger.jsonl")):
        soak.phase = "confirm"  # a driver ran past the search before its point came
    if soak.phase == "search" and done >= SEARCH_SHARE * points:
        return "confirm:1"
    if soak.phase == "confirm" and done >= (SEARCH_SHARE + CONFIRM_SHARE) * points:
        return f"report:{soak.rng.randint(1, 3)}"
    table = {"search": SEARCH, "confirm": CONFIRM, "over": OVER}[soak.phase]
    queue = soak.queue.setdefault(soak.phase, [])
    fits = [n for n in queue if (n != "lock.takeover" or lock_left) and (n != "orphans" or orphans)]
    if not fits:
        first = sorted(n for n in table if n in FIRST)
        rest = sorted(n for n in table if n not in FIRST)
        queue += soak.rng.sample(first, len(first)) + soak.rng.sample(rest, len(rest))
        fits = [n for n in queue if (n != "lock.takeover" or lock_left) and (n != "orphans" or orphans)]
    name = fits[0]
    queue.remove(name)
    low, high = table[name]
    high = min(high, orphans) if name == "orphans" else high
    return f"{name}:{soak.rng.randint(low, high)}"


def running_trials(run_dir: Path) -> list[Any]:
    """The study's trials Optuna holds as running."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{run_dir / 'study.db'}")
    return [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING]


def note_killed(soak: Soak, seen: float) -> None:
    """After a kill: the bounds of the bill of each trial it left running with no end row (a trial already left by
    an earlier kill keeps the bounds of the driver that ran it)."""
    holder = runlock.read(soak.run_dir / runlock.LOCK_FILE, settle_s=0.0)
    beat = holder.beat if holder is not None else 0.0
    ends = LedgerView.of(read_rows(soak.run_dir / "ledger.jsonl")).last
    for t in running_trials(soak.run_dir):
        if t.number in soak.killed or (t.number in ends and ends[t.number].ended):
            continue
        last = ends.get(t.number)
        dispatched = "trial_config" in t.user_attrs
        if last is not None:
            base, seen_at = last.billable_s, last.wall_time
        else:
            base, seen_at = 0.0, t.datetime_start.timestamp()
        least = base + max(0.0, beat - seen_at) if dispatched else 0.0
        most = base + max(0.0, seen - seen_at) if dispatched else 0.0
        soak.killed[t.number] = Killed(t.number, least, most, dispatched)


def check(soak: Soak, fault: str, before: bytes, killed: bool, err: str) -> None:
    """What must hold after any driver, killed or not; at the end (``killed`` False, study over) that it is whole."""
    import optuna

    run_dir = soak.run_dir
    ledger = run_dir / "ledger.jsonl"
    after = ledger.read_bytes() if ledger.exists() else b""
    whole = before[: before.rfind(b"\n") + 1]  # a torn last line is moved aside by the next writer
    if not after.startswith(whole):
        raise soak.fail(fault, "earlier ledger bytes changed", err)
    torn = before[len(whole) :]
    if torn and after != before and torn.strip() not in (run_dir / "ledger.jsonl.torn").read_bytes():
        raise soak.fail(fault, "a torn line was dropped, not kept in ledger.jsonl.torn", err)
    rows = read_rows(ledger)
    keys = [(r.trial, r.iteration, r.state) for r in rows]
    if len(keys) != len(set(keys)):
        raise soak.fail(fault, f"a row was written twice: {[k for k, n in Counter(keys).items() if n > 1]}", err)
    end_rows = [r for r in rows if r.ended]
    ended = Counter(r.trial for r in end_rows)
    if any(n > 1 for n in ended.values()):
        raise soak.fail(fault, f"a trial has two end rows: {[t for t, n in ended.items() if n > 1]}", err)
    ends = {r.trial: r for r in end_rows}
    for name, whole_file in WHOLE.items():
        path = run_dir / name
        if path.exists() and not whole_file(path.read_text(encoding="utf-8", errors="replace")):
            raise soak.fail(fault, f"{name} was left half-written", err)
    if not (run_dir / "study.db").exists():
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{run_dir / 'study.db'}")
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    if {r.trial for r in rows} - set(trials):
        raise soak.fail(fault, "the ledger bills a trial the study does not hold", err)
    for number, t in trials.items():
        state = t.state.name
        if state == "WAITING":  # queued, never asked
            continue
        end = ends.get(number)
        if state == "RUNNING":
            if end is not None and not killed:
                raise soak.fail(fault, f"trial {number} has an end row but Optuna still holds it running", err)
            if not killed:
                raise soak.fail(fault, f"trial {number} is left running by a driver that ended cleanly", err)
            continue
        if end is None:
            raise soak.fail(fault, f"trial {number} ended in Optuna ({state}) with no end row in the ledger", err)
        told = TOLD[(end.state, end.cause)]
        if state not in told or t.user_attrs.get("state") != end.state.value:
            raise soak.fail(
                fault,
                f"trial {number}: the ledger says {end.state} ({end.cause}), Optuna {state} with "
                f"state attribute {t.user_attrs.get('state')!r}",
                err,
            )
    for number, k in soak.killed.items():
        end = ends.get(number)
        if end is None:
            continue
        billed = end.billable_s
        if not (k.least_s - 1e-6 <= billed <= k.most_s + 1e-6):
            raise soak.fail(
                fault,
                f"trial {number}, killed with its driver, is billed {billed:.3f} s, outside [{k.least_s:.3f}, "
                f"{k.most_s:.3f}] (its driver's last heartbeat, the kill)",
                err,
            )
    spent = sum(metrics(r).usd for r in LedgerView.of(rows).last.values() if r.ended)
    if spent < soak.spent_usd - 1e-9:
        raise soak.fail(fault, f"the study's spend went down from ${soak.spent_usd:.4f} to ${spent:.4f}", err)
    soak.spent_usd = spent
    if not killed and soak.phase == "over":  # the study ended whole
        asked = [n for n, t in trials.items() if t.state.name != "WAITING"]
        if sorted(asked) != sorted(ends):
            raise soak.fail(fault, f"trials without an end row: {sorted(set(asked) - set(ends))}", err)
        if (run_dir / runlock.LOCK_FILE).exists() or list(run_dir.glob(f"{runlock.LOCK_FILE}.*")):
            raise soak.fail(fault, "a clean stop left lock files behind", err)


def two_at_once(soak: Soak, fault: str) -> tuple[int, str, float, str]:
    """Two drivers started on the folder at once: one runs (to ``fault``), the other exits 2 naming it. Returns the
    runner's (exit status, stderr, when seen exiting) and the refused one's line."""
    first, second = soak.launch(fault), soak.launch(fault)
    (code_a, err_a, seen_a), (code_b, err_b, seen_b) = wait(first, soak, fault), wait(second, soak, fault)
    outcomes = [(code_a, err_a, seen_a, first.pid), (code_b, err_b, seen_b, second.pid)]
    refused = [o for o in outcomes if o[0] == 2]
    ran = [o for o in outcomes if o[0] != 2]
    if len(refused) != 1 or len(ran) != 1:
        raise soak.fail(fault, f"two drivers at once: exit statuses {code_a} and {code_b}", err_a + err_b)
    lines = refused[0][1].strip().splitlines()
    holder = ran[0][3]
    if len(lines) != 1 or not lines[0].startswith("error:") or f"pid {holder} on host" not in lines[0]:
        raise soak.fail(fault, f"the refused driver did not say in one line who holds the folder: {lines}")
    return ran[0][0], ran[0][1], ran[0][2], lines[0]


def run(out: Path, points: int, seed: int, say: Any = print, env: dict[str, str] | None = None) -> Soak:
    """Kill and resume a real study until ``points`` kills happened, checking after each driver; then resume it
    once more, unarmed, and check it ended whole. Raises :class:`SoakFailure` on the first failed check."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "space.yaml").write_text(yaml.safe_dump(SPACE))
    soak = Soak(out, rng=random.Random(seed), env=env or {})
    together = {0, max(1, points // 3)}  # two drivers at once: on the new folder, and in the search
    while sum(soak.kills.values()) < points:
        if soak.cycle > 3 * points:
            raise soak.fail("-", f"only {sum(soak.kills.values())} of {points} kills in {soak.cycle} drivers")
        if soak.cycle in together and soak.phase == "search":  # the runner lives on well past the other's look
            fault = f"checkpoint:{soak.rng.randint(2, 3)}"
        else:
            fault = choose(soak, points)
        ledger = soak.run_dir / "ledger.jsonl"
        before = ledger.read_bytes() if ledger.exists() else b""
        started = time.time()
        if soak.cycle in together:
            code, err, seen, line = two_at_once(soak, fault)
            say(f"two drivers at once: one ran, the other said: {line[:160]}")
        else:
            code, err, seen = wait(soak.launch(fault), soak, fault)
        killed = code == -signal.SIGKILL
        if not killed and code != 0:
            raise soak.fail(fault, f"the driver exited with status {code}", err)
        if "Traceback" in err:
            raise soak.fail(fault, "a traceback on stderr", err)
        name = fault.split(":")[0]
        if killed:
            soak.kills[name] += 1
            note_killed(soak, seen)
            if name == "confirm" and soak.phase == "search":
                soak.phase = "confirm"
            if name == "report":
                soak.phase = "over"
        else:
            soak.phase = "over"  # it ran to the end: the point lay beyond the study
        check(soak, fault, before, killed, err)
        say(f"driver {soak.cycle:3d} {fault:18s} {'killed' if killed else f'exit {code}'} in {seen - started:5.1f} s")
        soak.cycle += 1
    code, err, _ = wait(soak.launch(""), soak, "final resume")
    if code != 0:
        raise soak.fail("final resume", f"exit status {code}", err)
    soak.phase = "over"
    ledger = soak.run_dir / "ledger.jsonl"
    check(soak, "final resume", ledger.read_bytes(), False, err)
    return soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=40, help="kills to make (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the points and counts chosen")
    parser.add_argument("--out", type=Path, default=Path("reports/kill-soak"), help="folder for the run (reused: no)")
    args = parser.parse_args()
    if (args.out / "soak").exists():
        sys.exit(f"{args.out / 'soak'} exists: give a new --out")
    t0 = time.time()
    soak = run(args.out, args.points, args.seed, env={k: os.environ.get(k, v) for k, v in CACHE_ENV.items()})
    rows = read_rows(soak.run_dir / "ledger.jsonl")
    print(json.dumps({"kills": dict(soak.kills), "drivers": soak.cycle + 1, "trials": len(LedgerView.of(rows).last),
                      "seconds": round(time.time() - t0)}, sort_keys=True))  # fmt: skip


if __name__ == "__main__":
    main()
