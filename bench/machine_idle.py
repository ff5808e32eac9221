"""The machine's idle CPU share over a phase, from ``/proc/stat``: whether a phase was bound by the broker or
by the machine.

On a machine shared with other work, a phase's throughput says as much about the other work as about the
broker. Beside the broker's own CPU (:mod:`bench.broker_cpu`), the share of the machine's CPU time that was
idle during the phase tells the two apart: a phase run with a core to spare (idle near 0.5 on two cores) was
bound by the broker or the client, one run with none (idle near 0) by the machine, and its rate moves with
whatever else ran.

``/proc/stat``'s first line, ``cpu``, holds the clock ticks (``USER_HZ``) every core together spent in each
state since boot: user, nice, system, idle, iowait, irq, softirq, steal (then guest and guest_nice, already
counted in user and nice). Idle time is idle + iowait (a core waiting for I/O could run something else);
all time is the sum of the first eight. The idle share of a phase is the growth of the idle ticks over the
growth of all ticks between a reading before and one after it: 1.0 when every core was idle throughout,
0.0 when none ever was. Ticks are 10 ms per core: a phase of a second on two cores is read to the percent.

:class:`MachineIdle` reads it; its ``phase()`` measures a block of code. Reading is thread-safe (each read
is one ``/proc`` file read); a phase object belongs to the thread that opened it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: 0-based indexes, among the counters after ``cpu``, of idle and iowait; the first eight count all time
_IDLE = 3
_IOWAIT = 4
_STATES = 8


def idle_ticks(stat_text: str) -> tuple[int, int]:
    """(idle + iowait, all) ticks of every core since boot, from the text of ``/proc/stat``."""
    line = stat_text.split("\n", 1)[0]
    words = line.split()
    if not words or words[0] != "cpu":
        raise ValueError(f"/proc/stat: expected its first line to start with 'cpu', got {line[:80]!r}")
    if len(words) < 1 + _STATES:
        raise ValueError(
            f"/proc/stat: expected at least {_STATES} counters on the 'cpu' line, got {len(words) - 1}: "
            f"{line[:80]!r}"
        )
    counters = [int(word) for word in words[1 : 1 + _STATES]]
    return counters[_IDLE] + counters[_IOWAIT], sum(counters)


def idle_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The idle share between two :func:`idle_ticks` readings; 1.0 when no tick passed (nothing ran)."""
    idle = after[0] - before[0]
    total = after[1] - before[1]
    if total < 0 or idle < 0 or idle > total:
        raise ValueError(f"/proc/stat readings out of order: {before} then {after}")
    return 1.0 if total == 0 else idle / total


@dataclass
class PhaseIdle:
    """The machine's idle share over one phase; ``share`` is set when the phase's block ends."""

    share: float = 1.0


@dataclass(frozen=True)
class MachineIdle:
    """The machine's idle CPU (every core), read from ``path`` (``/proc/stat``)."""

    path: Path = Path("/proc/stat")

    def ticks(self) -> tuple[int, int]:
        return idle_ticks(self.path.read_text())

    @contextmanager
    def phase(self) -> Iterator[PhaseIdle]:
        """``with idle.phase() as seen: ...``: ``seen.share`` is the machine's idle share over the block."""
        seen = PhaseIdle()
        before = self.ticks()
        yield seen
        seen.share = idle_share(before, self.ticks())
