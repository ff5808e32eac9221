"""The figures of several alternated rounds: a median with its min and max, and ratios of two medians.

A benchmark on a machine that may be shared runs each case several times, alternating the systems; the
median is the figure and ``[min - max]`` shows how far one round moved. :class:`Spread` holds one case's
values; :func:`ratio` divides two medians (Lumber / Kafka), None when either side has no values.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Spread:
    """The values of one case, one per round, in the order measured."""

    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    def __bool__(self) -> bool:
        return bool(self.values)

    @property
    def median(self) -> float:
        if not self.values:
            raise ValueError("no values: a case that never ran has no median")
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def text(self, digits: int = 0) -> str:
        """``median [min - max]`` with thousands separators, ``-`` when empty."""
        if not self.values:
            return "-"
        if len(self.values) == 1:
            return f"{self.median:,.{digits}f}"
        return f"{self.median:,.{digits}f} [{self.low:,.{digits}f} - {self.high:,.{digits}f}]"


def ratio(ours: Spread, theirs: Spread) -> float | None:
    """median(ours) / median(theirs); None when either has no values or theirs is 0."""
    if not ours or not theirs or theirs.median == 0:
        return None
    return ours.median / theirs.median


def ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
