"""The per-topic configs Lumber keeps in ``/config/topics/<topic>`` (:mod:`broker.cluster.zk_paths`): which
keys there are, what values they take, and what a topic's config means to the brokers.

Every writer checks a topic's configs here (:meth:`~broker.cluster.topic_admin.TopicAdmin.create_topic`,
so CreateTopics, ``lumber topics create`` and the dev stack alike); the readers (the replica manager's
``min.insync.replicas``, the controller's unclean election) read them through :func:`min_insync_replicas`
and :func:`unclean_leader_election`, the broker's own setting standing where the topic has none. Kafka's
names and meanings; every other Kafka topic config is refused with its name (the rest of a topic's settings
live in ``lumber.toml``; compaction adds its own keys here). Pure functions: thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.cluster.errors import InvalidTopicConfigError
from broker.cluster.zk_paths import MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE

#: Kafka's ``cleanup.policy`` (the group coordinator creates ``__consumer_offsets`` compacted).
CLEANUP_POLICY = "cleanup.policy"
_CLEANUP_POLICIES = ("delete", "compact", "compact,delete")

#: Each key Lumber reads, with what its value must be.
TOPIC_CONFIGS: Mapping[str, str] = {
    MIN_INSYNC_REPLICAS: "an integer from 1 to the replication factor",
    UNCLEAN_LEADER_ELECTION_ENABLE: "true or false",
    CLEANUP_POLICY: "delete, compact or compact,delete",
}


def check_topic_configs(
    topic: str, configs: Mapping[str, str | None], replication_factor: int
) -> dict[str, str]:
    """``configs`` in their stored form (trimmed, lower-case booleans, plain integers), each key one of
    :data:`TOPIC_CONFIGS` with a value it takes; InvalidTopicConfigError naming the topic, key and value."""
    checked: dict[str, str] = {}
    for key, raw in configs.items():
        if key not in TOPIC_CONFIGS:
            raise InvalidTopicConfigError(
                f"topic {topic!r}: Lumber does not read the topic config {key!r} (accepted: "
                f"{', '.join(TOPIC_CONFIGS)}); set the others in lumber.toml"
            )
        value = (raw or "").strip()
        if key == MIN_INSYNC_REPLICAS:
            if not value.isdigit() or not 1 <= int(value) <= replication_factor:
                raise InvalidTopicConfigError(
                    f"topic {topic!r}: {key}={raw!r}: with replication factor {replication_factor} it must "
                    f"be an integer from 1 to {replication_factor} (a larger one would refuse every "
                    "acks=all write)"
                )
            value = str(int(value))
        elif key == CLEANUP_POLICY:
            policy = ",".join(sorted(part.strip() for part in value.lower().split(",")))
            if policy not in _CLEANUP_POLICIES:
                raise InvalidTopicConfigError(
                    f"topic {topic!r}: {key}={raw!r}: expected one of {', '.join(_CLEANUP_POLICIES)}"
                )
            value = policy
        elif value.lower() not in ("true", "false"):
            raise InvalidTopicConfigError(f"topic {topic!r}: {key}={raw!r}: expected true or false")
        checked[key] = value.lower()
    return checked


def min_insync_replicas(configs: Mapping[str, str], default: int) -> int:
    """The topic's ``min.insync.replicas``, else ``default`` (the broker's)."""
    value = configs.get(MIN_INSYNC_REPLICAS)
    return int(value) if value is not None and value.isdigit() and int(value) >= 1 else default


def unclean_leader_election(configs: Mapping[str, str], default: bool) -> bool:
    """The topic's ``unclean.leader.election.enable``, else ``default`` (the broker's)."""
    value = configs.get(UNCLEAN_LEADER_ELECTION_ENABLE)
    return default if value is None else value.strip().lower() == "true"
