"""A broker a conformance scenario runs against: Apache Kafka or Lumber, as a bootstrap address.

A scenario only talks to ``bootstrap`` with standard clients. ``log_dirs`` is for the one thing a client
cannot see: whether the log cleaner has been through a partition yet (both brokers keep Kafka's
``cleaner-offset-checkpoint`` file, version 0: a version line, a count line, then ``topic partition offset``
lines), so a compaction scenario reads a cleaned log, not a lucky one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lumber.dev.process import wait_until

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True)
class Target:
    """One broker under test: ``name`` is ``kafka`` or ``lumber``."""

    name: str
    bootstrap: str
    log_dirs: tuple[Path, ...]

    def cleaned_offset(self, topic: str, partition: int) -> int:
        """The partition's first dirty offset as the cleaner last checkpointed it (-1: never cleaned)."""
        for log_dir in self.log_dirs:
            path = log_dir / CLEANER_CHECKPOINT
            if not path.exists():
                continue
            for line in path.read_text().splitlines()[2:]:
                parts = line.split()
                if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition:
                    return int(parts[2])
        return -1

    def wait_cleaned(self, topic: str, partition: int, offset: int, timeout_s: float = 60.0) -> None:
        """Wait until the cleaner has cleaned ``topic-partition`` up to at least ``offset``."""
        wait_until(
            lambda: self.cleaned_offset(topic, partition) >= offset,
            timeout_s,
            f"{self.name}'s cleaner to clean {topic}-{partition} up to offset {offset} "
            f"(now {self.cleaned_offset(topic, partition)})",
            interval_s=0.2,
        )
