"""The bad-input error of ``lumber topics`` (:mod:`lumber.cli.topics`, :mod:`lumber.cli.topics_elect`)."""

from __future__ import annotations

from broker.cluster.errors import ClusterError


class TopicRequestError(ClusterError):
    """What was asked of a topic cannot be done as typed (a replication factor above the live brokers, a
    config Lumber does not read, a partition the topic lacks); the message names the option and why."""
