"""The one error of ``lumber demo`` (:mod:`lumber.demo`, :mod:`lumber.demo_failover`)."""

from __future__ import annotations

from pipeline.errors import PipelineError


class DemoError(PipelineError):
    """The demo cannot start or go on (the message says what to do)."""
