"""The answer to a compatibility test (``POST /compatibility/subjects/{subject}/versions/{version}``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompatibilityResult:
    """Whether a schema passed the subject's compatibility level, and why not (rule and path per message)."""

    is_compatible: bool
    messages: tuple[str, ...] = ()
