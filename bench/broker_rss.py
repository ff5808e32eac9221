"""A broker process's resident memory, read from ``/proc/<pid>/status``: issue 39's memory figure.

``VmRSS`` in ``/proc/<pid>/status`` is the process's resident set in kB (kibibytes, as the kernel writes
them: ``VmRSS:\\t  123456 kB``): its anonymous memory (a JVM's touched heap, metaspace, code cache, thread
stacks; a Python broker's objects), its file mappings resident in memory (mapped index files, shared
libraries) and shared memory. It is what the kernel charges the process for now, not what it reserved
(``VmSize``): a JVM with ``-Xms1G`` and no ``AlwaysPreTouch`` grows its RSS as it touches the heap. Page
cache the broker's segment files occupy through ``read``/``write``/``sendfile`` is not in it.

:class:`BrokerRss` reads one process or the sum of several (a cluster's brokers, each read in turn). A
process that is gone raises :class:`BrokerGoneError` (as for the CPU time, a reading must not silently be
zero). Reading is thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.broker_cpu import BrokerGoneError

MIB = 1024 * 1024


def status_rss_bytes(status_text: str) -> int:
    """The ``VmRSS`` of one ``/proc/<pid>/status`` text, in bytes."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            words = line.split()
            if len(words) != 3 or words[2] != "kB" or not words[1].isdigit():
                raise ValueError(f"a VmRSS line not of the form 'VmRSS: <n> kB': {line!r}")
            return int(words[1]) * 1024
    raise ValueError("no VmRSS line in the /proc/<pid>/status text (a kernel thread, or a zombie)")


@dataclass(frozen=True)
class BrokerRss:
    """The resident memory of processes ``pids`` together."""

    pids: tuple[int, ...]

    def bytes(self) -> int:
        total = 0
        for pid in self.pids:
            try:
                text = Path(f"/proc/{pid}/status").read_text()
            except (FileNotFoundError, ProcessLookupError) as exc:
                raise BrokerGoneError(f"process {pid} is gone: its memory cannot be read") from exc
            total += status_rss_bytes(text)
        return total

    def mib(self) -> float:
        return self.bytes() / MIB
