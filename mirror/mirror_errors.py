"""The mirror's exceptions (:mod:`mirror.mirror`)."""

from __future__ import annotations

from broker.errors import BrokerError


class MirrorError(BrokerError):
    """Root of the mirror's errors: it cannot start, or cannot go on without risking a loss."""


class MirrorConfigError(MirrorError, ValueError):
    """A :class:`~mirror.mirror_config.MirrorConfig` value is out of range or inconsistent."""


class TopicMismatchError(MirrorError):
    """A mirrored topic exists on the target with another partition count (partitions must be kept)."""
