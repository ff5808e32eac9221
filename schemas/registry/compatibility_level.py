"""The registry's compatibility levels (Confluent's names and meanings)."""

from __future__ import annotations

from enum import StrEnum

from schemas.errors import InvalidCompatibilityLevelError


class CompatibilityLevel(StrEnum):
    """Which earlier versions a new schema is checked against, and in which direction.

    * BACKWARD: the new schema (as reader) reads data written with the latest version.
    * FORWARD: the latest version (as reader) reads data written with the new schema.
    * FULL: both.
    * ``*_TRANSITIVE``: the same, against every live (not soft-deleted) version instead of the latest only.
    * NONE: no check.
    """

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def backward(self) -> bool:
        """The new schema must read the old data."""
        return self in (self.BACKWARD, self.BACKWARD_TRANSITIVE, self.FULL, self.FULL_TRANSITIVE)

    @property
    def forward(self) -> bool:
        """The old schemas must read the new data."""
        return self in (self.FORWARD, self.FORWARD_TRANSITIVE, self.FULL, self.FULL_TRANSITIVE)

    @property
    def transitive(self) -> bool:
        """Checked against every live version, not only the latest."""
        return self.value.endswith("_TRANSITIVE")

    def as_transitive(self) -> CompatibilityLevel:
        """The same directions, checked against every live version."""
        if self is CompatibilityLevel.NONE or self.transitive:
            return self
        return CompatibilityLevel(f"{self.value}_TRANSITIVE")

    @classmethod
    def parse(cls, value: object) -> CompatibilityLevel:
        """Case-insensitive; raises :class:`InvalidCompatibilityLevelError` (42203) naming valid levels."""
        if isinstance(value, str):
            try:
                return cls(value.upper())
            except ValueError:
                pass
        valid = ", ".join(level.value for level in cls)
        raise InvalidCompatibilityLevelError(
            f"Invalid compatibility level {value!r}. Valid values are {valid}"
        )
