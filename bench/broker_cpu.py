"""A broker process's CPU time, read from ``/proc/<pid>/stat``: the fairest figure on a shared machine.

Wall-clock throughput on a machine other work is using says as much about the other work as about the
broker; the CPU seconds the broker process itself spent on a phase do not (up to cache effects). Field 14
(``utime``) plus field 15 (``stime``) of ``/proc/<pid>/stat`` are the process's user and system time in
clock ticks (``SC_CLK_TCK``, 100 per second on Linux), summed over all its threads, the JVM's garbage
collector and compiler threads included. The command name (field 2) is in parentheses and may hold spaces
and parentheses itself, so the fields are counted from its last ``)``.

:class:`BrokerCpu` reads one process, :class:`BrokersCpu` the sum of several (a cluster's brokers, each
read in turn); their ``phase()`` measures the seconds a block of code cost them, which :func:`per_million`
turns into CPU seconds per million records. A process that is gone raises
:class:`BrokerGoneError` (a phase must not silently count zero). The resolution is one tick (10 ms): a phase
should cost the broker at least a second of CPU for a figure to the percent. Not thread-safe per phase
object; reading is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: 0-based indexes of utime and stime among the fields after the command name's closing parenthesis
#: (field 3, the state, is index 0 there)
_UTIME = 11
_STIME = 12


class BrokerGoneError(RuntimeError):
    """The process whose CPU time was asked for does not exist (any more)."""


def stat_cpu_seconds(stat_line: str, ticks_per_second: int) -> float:
    """utime + stime of one ``/proc/<pid>/stat`` line, in seconds."""
    close = stat_line.rfind(")")
    if close < 0:
        raise ValueError(f"not a /proc/<pid>/stat line (no ')' after the command name): {stat_line[:80]!r}")
    fields = stat_line[close + 1 :].split()
    if len(fields) <= _STIME:
        raise ValueError(
            f"a /proc/<pid>/stat line with {len(fields) + 2} fields, expected at least {_STIME + 3}: "
            f"{stat_line[:80]!r}"
        )
    return (int(fields[_UTIME]) + int(fields[_STIME])) / ticks_per_second


@dataclass
class PhaseCpu:
    """The CPU seconds one phase cost; ``seconds`` is set when the phase's block ends."""

    seconds: float = 0.0


@dataclass(frozen=True)
class BrokerCpu:
    """The CPU time of process ``pid`` (a broker: a JVM, or a Python process and all its threads)."""

    pid: int

    def seconds(self) -> float:
        try:
            line = Path(f"/proc/{self.pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError) as exc:
            raise BrokerGoneError(f"process {self.pid} is gone: its CPU time cannot be read") from exc
        return stat_cpu_seconds(line, os.sysconf("SC_CLK_TCK"))

    @contextmanager
    def phase(self) -> Iterator[PhaseCpu]:
        """``with cpu.phase() as spent: ...``: ``spent.seconds`` is what the block cost the process."""
        spent = PhaseCpu()
        before = self.seconds()
        yield spent
        spent.seconds = self.seconds() - before


@dataclass(frozen=True)
class BrokersCpu:
    """The CPU time of processes ``pids`` together (one broker, or every broker of a cluster)."""

    pids: tuple[int, ...]

    def seconds(self) -> float:
        return sum(BrokerCpu(pid).seconds() for pid in self.pids)

    @contextmanager
    def phase(self) -> Iterator[PhaseCpu]:
        """``with cpu.phase() as spent: ...``: ``spent.seconds`` is what the block cost the processes."""
        spent = PhaseCpu()
        before = self.seconds()
        yield spent
        spent.seconds = self.seconds() - before


def per_million(cpu_seconds: float, records: int) -> float:
    """CPU seconds per million records."""
    if records <= 0:
        raise ValueError(f"a phase of {records} records has no CPU per record")
    return cpu_seconds / records * 1_000_000
