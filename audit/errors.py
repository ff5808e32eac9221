"""The audit's errors: one family below :class:`~pipeline.errors.PipelineError`."""

from __future__ import annotations

from pipeline.errors import PipelineError


class AuditError(PipelineError):
    """The audit cannot be read or reconciled (the audit topic is unreachable, windows do not line up,
    an argument is malformed); the message says which."""
