"""How far a window's loaded count may be from its expected count and still be COMPLETE.

Written as a count of messages (``"0"``, ``"5"``) or as a share of the window's expected count
(``"0.1%"``, rounded down to whole messages). It applies to the missing and the duplicate count separately.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_COUNT = re.compile(r"[0-9]+")
_SHARE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)%")


@dataclass(frozen=True)
class Tolerance:
    """``count`` messages, or ``percent`` of the expected count when it is set."""

    count: int = 0
    percent: float | None = None

    @classmethod
    def parse(cls, text: str, where: str = "tolerance") -> Tolerance:
        """``"N"`` or ``"P%"``; raises :class:`ValueError` naming ``where`` otherwise."""
        value = text.strip()
        if _COUNT.fullmatch(value):
            return cls(count=int(value))
        share = _SHARE.fullmatch(value)
        if share and float(share.group(1)) <= 100:
            return cls(percent=float(share.group(1)))
        raise ValueError(
            f"{where}: expected a count of messages (e.g. 0 or 5) or a percentage up to 100% (e.g. 0.1%), "
            f"got {text!r}"
        )

    def allowed(self, expected: int) -> int:
        """Messages a window that expects ``expected`` may miss (or duplicate)."""
        if self.percent is None:
            return self.count
        return math.floor(expected * self.percent / 100)

    def __str__(self) -> str:
        if self.percent is None:
            return str(self.count)
        return f"{self.percent:g}%"
