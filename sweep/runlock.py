"""One driver per run folder: the lock file ``driver.lock``, with the driver's heartbeat inside it.

A driver (``sweep.run``) holds its run folder from before it writes anything there until it stops. The lock file is
created exclusively (``O_CREAT | O_EXCL``: one creator wins, on a local or a shared filesystem, with no ``flock``)
and holds one JSON object: the driver's host, process id, start time and heartbeat, the time of its latest beat,
rewritten every :data:`BEAT_S` seconds (a new file renamed over the old one, so a reader sees one whole version).

A holder is judged from the file's content, never from its times on disk (a folder copied elsewhere keeps its lock
with new file times): it is dead once its last beat is older than :data:`STALE_S` (three missed beats), or at once
when it ran on this machine and its process is gone. A dead holder is taken over: the taker first creates
``driver.lock.<holder's token>`` exclusively, so that of the drivers racing for one dead lock exactly one wins, then
renames its own lock over the dead one. The taker keeps each dead driver's life (start, last beat) in its lock, and a
resume bills the trials that driver left running up to its last sign of life
(:func:`sweep.planner.study_store.close_orphans`, which also reads the ``heartbeat`` file of folders written before
the lock existed). A driver that finds its lock replaced (it was paused past the limit and taken over) stops writing.
A clean stop removes the lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sweep import faults
from sweep.errors import SweepError

LOCK_FILE = "driver.lock"
#: The file a driver touched while it ran, before the lock held the heartbeat (still read, never written).
LEGACY_HEARTBEAT = "heartbeat"
#: Seconds between beats.
BEAT_S = 5.0
#: A holder whose last beat is older than this is dead: three missed beats.
STALE_S = 3 * BEAT_S
#: Dead drivers' lives a lock keeps (a chain of drivers that each died before closing the last one's trials).
KEEP_LIVES = 16


class LockHeld(SweepError):
    """The run folder is held by a live driver."""


class LockLost(SweepError):
    """This driver's lock was taken over by another driver."""


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _machine() -> tuple[str | None, str | None]:
    """(boot id, pid namespace) of this machine where Linux says them: two processes with the same pair see the same
    process ids, so one's liveness can be checked from the other."""
    boot = _read_text("/proc/sys/kernel/random/boot_id")
    try:
        namespace: str | None = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = None
    return (boot.strip() if boot else None), namespace


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), so a reused pid is not taken for the holder;
    None where /proc does not say."""
    text = _read_text(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None


@dataclass(frozen=True)
class Holder:
    """A lock file's content: the driver that holds (or held) the run folder."""

    host: str
    pid: int
    since: float
    """Unix seconds when it took the folder."""
    beat: float
    """Unix seconds of its latest heartbeat."""
    token: str
    """Random, one per acquisition: names the lock's generation (the takeover claim) and tells a holder its own."""
    boot: str | None = None
    pid_ns: str | None = None
    started: str | None = None
    """The process's start (clock ticks since boot), to tell it from a later process with the same pid."""
    stale_s: float = STALE_S
    lives: list[list[float]] = field(default_factory=list)
    """[start, last beat] of each driver that held the folder before this one and died holding it, oldest first."""

    @classmethod
    def mine(cls) -> Holder:
        boot, namespace = _machine()
        now = time.time()
        pid = os.getpid()
        return cls(socket.gethostname(), pid, now, now, secrets.token_hex(8), boot, namespace, _process_start(pid))

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        try:
            data = json.loads(text)
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (ValueError, TypeError, KeyError):
            return None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def _on_this_machine(self) -> bool:
        boot, namespace = _machine()
        if self.boot and boot and self.pid_ns and namespace:
            return (self.boot, self.pid_ns) == (boot, namespace)
        return self.host == socket.gethostname() and not (self.boot or boot)

    def _process_gone(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # someone else's process: there, so not gone
            return False
        return bool(self.started) and _process_start(self.pid) not in (None, self.started)

    def dead(self, now: float) -> str | None:
        """Why this holder is dead, or None while it may be alive."""
        if self.token.startswith("unreadable-"):
            return "its lock file cannot be read"
        if self._on_this_machine() and self._process_gone():
            return "its process is gone"
        if now - self.beat > self.stale_s:
            return f"no heartbeat for {now - self.beat:.0f} s (the limit is {self.stale_s:g} s)"
        return None

    def describe(self, now: float) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on host {self.host}, since {since}, last beat {max(0.0, now - self.beat):.0f} s ago"


def read(path: Path, settle_s: float = 1.0) -> Holder | None:
    """The holder recorded in lock (or claim) file ``path``; None when there is no such file. Content still being
    written is read again for up to ``settle_s``; content that never parses is a holder that is dead (it died
    between creating the file and writing it), named after the bytes so that every reader names it alike."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        holder = Holder.parse(data.decode("utf-8", errors="replace"))
        if holder is not None:
            return holder
        if time.monotonic() >= deadline:
            token = "unreadable-" + hashlib.sha256(data).hexdigest()[:16]
            return Holder("?", 0, 0.0, 0.0, token)
        time.sleep(0.05)


def live_holder(run_dir: str | Path) -> Holder | None:
    """The live driver that holds ``run_dir``, or None."""
    holder = read(Path(run_dir) / LOCK_FILE)
    return holder if holder is not None and holder.dead(time.time()) is None else None


def held_message(run_dir: Path, holder: Holder, now: float) -> str:
    return (
        f"{run_dir} is held by another sweep.run ({holder.describe(now)}): one driver per run folder; wait for it "
        f"to end or stop it (kill {holder.pid} on {holder.host}), then resume={run_dir}; a driver that has died is "
        f"taken over once its last beat is {holder.stale_s:g} s old"
    )


def check_free(run_dir: str | Path) -> None:
    """Raise :class:`LockHeld` (one line: the holder, what to do) when a live driver holds ``run_dir``."""
    run_dir = Path(run_dir)
    holder = live_holder(run_dir)
    if holder is not None:
        raise LockHeld(held_message(run_dir, holder, time.time()))


def _write_new(path: Path, holder: Holder) -> bool:
    """Create ``path`` exclusively with ``holder``; False when it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(holder.to_json())
        f.flush()
        os.fsync(f.fileno())
    return True


def _replace(path: Path, holder: Holder, fault: str) -> None:
    """Write ``holder`` beside ``path`` and rename it over ``path``: readers see the old or the new, whole."""
    tmp = path.with_name(f"{LOCK_FILE}.{holder.token}.tmp")
    tmp.write_text(holder.to_json(), encoding="utf-8")
    faults.point(fault)
    os.replace(tmp, path)


class RunLock:
    """A held run folder. :func:`acquire` takes it; a thread beats every :data:`BEAT_S`; :meth:`release` frees it."""

    def __init__(self, run_dir: Path, holder: Holder) -> None:
        self.run_dir, self.path, self.holder = run_dir, run_dir / LOCK_FILE, holder
        self.lost = threading.Event()
        """Set once another driver's lock is found in place of this one: write nothing more."""
        self.taker: Holder | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_loop, name="sweep-heartbeat", daemon=True)
        self._thread.start()

    def beat(self) -> bool:
        """Rewrite the heartbeat; False (and :attr:`lost` set) when the lock is no longer this driver's."""
        current = read(self.path, settle_s=0.0)
        if current is None or current.token != self.holder.token:
            self.taker = current
            self.lost.set()
            return False
        self.holder = replace(self.holder, beat=time.time())
        _replace(self.path, self.holder, "lock.beat")
        return True

    def _beat_loop(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                if not self.beat():
                    return
            except OSError:  # a full disk or a filesystem hiccup: the next beat tries again
                continue

    def check(self) -> None:
        """Raise :class:`LockLost` once the folder was taken over."""
        if self.lost.is_set():
            taker = f" ({self.taker.describe(time.time())})" if self.taker else ""
            raise LockLost(
                f"{self.run_dir} was taken over by another sweep.run{taker} while this one missed its heartbeats "
                f"(paused for more than {self.holder.stale_s:g} s?); this one stopped without writing more; the "
                "new driver bills the trials it left"
            )

    def release(self) -> None:
        """Stop beating; if the lock is still this driver's, remove it with the claims and half-written beats that
        drivers killed before it left beside it."""
        self._stop.set()
        self._thread.join()
        current = read(self.path, settle_s=0.0)
        if current is None or current.token != self.holder.token:
            return
        for leftover in self.run_dir.glob(f"{LOCK_FILE}.*"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(run_dir: str | Path) -> RunLock:
    """Hold ``run_dir`` (it must exist): create the lock, or take over a dead holder's; :class:`LockHeld` when a
    live driver holds it."""
    run_dir = Path(run_dir)
    path = run_dir / LOCK_FILE
    mine = Holder.mine()
    for _ in range(10):  # each turn: the lock was removed or replaced between two looks
        if _write_new(path, mine):
            return RunLock(run_dir, mine)
        holder = read(path)
        if holder is None:
            continue
        taken = _take_over(path, holder, mine)
        if taken is not None:
            return RunLock(run_dir, taken)
    raise LockHeld(f"{run_dir}: its lock file {path} keeps changing under this driver; run the command again")


def _take_over(path: Path, holder: Holder, mine: Holder) -> Holder | None:
    """Take the lock from ``holder`` if it is dead: win its generation's claim, then rename this driver's lock over
    it. Returns this driver's holder record, or None when the claim vanished (look again); raises
    :class:`LockHeld` while the holder, or a driver taking it over, lives."""
    current = holder
    while True:
        now = time.time()
        if current.dead(now) is None:
            raise LockHeld(held_message(path.parent, current, now))
        claim = path.with_name(f"{LOCK_FILE}.{current.token}")
        if _write_new(claim, mine):
            break
        claimer = read(claim)  # another driver is taking over (or died doing it: then claim its generation)
        if claimer is None:
            return None
        current = claimer
    life = [[holder.since, holder.beat]] if holder.since > 0 else []
    taken = replace(mine, lives=[*holder.lives, *life][-KEEP_LIVES:])
    _replace(path, taken, "lock.takeover")
    return taken


def lives(run_dir: str | Path) -> tuple[list[tuple[float, float]], float]:
    """([start, last beat] of each driver that died holding ``run_dir``, oldest first; the current holder's start).

    A folder written before the lock held the heartbeat gives its ``heartbeat`` file's time as the last beat of one
    driver of unknown start (0). Without a lock (a planner run on its own) the current start is now."""
    run_dir = Path(run_dir)
    holder = read(run_dir / LOCK_FILE, settle_s=0.0)
    found = [(float(a), float(b)) for a, b in holder.lives] if holder is not None else []
    legacy = run_dir / LEGACY_HEARTBEAT
    if legacy.exists():
        found.insert(0, (0.0, legacy.stat().st_mtime))
    return sorted(found), holder.since if holder is not None else time.time()


__all__ = ["BEAT_S", "LOCK_FILE", "STALE_S", "Holder", "LockHeld", "LockLost", "RunLock", "acquire", "check_free"]
