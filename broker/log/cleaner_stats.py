"""What the log cleaner did: one pass's figures (:class:`CleanerStats`, Kafka's ``CleanerStats``) and the
cleaner threads' running totals (:class:`CleanerTotals`, what the metrics and ``lumber`` report)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class CleanerStats:
    """What one pass did (Kafka's ``CleanerStats``)."""

    map_records: int = 0
    map_keys: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    segments_cleaned: int = 0
    map_seconds: float = 0.0
    clean_seconds: float = 0.0
    end_offset: int = -1

    @property
    def recopy_percent(self) -> float:
        """Bytes written as a share of bytes read (Kafka's ``cleaner-recopy-percent``)."""
        return 100.0 * self.bytes_written / self.bytes_read if self.bytes_read else 0.0


@dataclass(slots=True)
class CleanerTotals:
    """Every pass of a :class:`LogCleaner` so far (metrics)."""

    passes: int = 0
    aborted: int = 0
    failed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    last: CleanerStats = field(default_factory=CleanerStats)
