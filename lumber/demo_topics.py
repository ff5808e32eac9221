"""Step 2 of ``lumber demo`` (:mod:`lumber.demo`): the demo's topics, spread over the brokers with
``min(brokers, 3)`` replicas and ``min.insync.replicas`` one less (at least 1), and its schemas registered."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient

from broker.cluster.topic_admin import TopicAdmin
from lumber.config import LumberConfig
from lumber.demo_traffic import TOPICS
from schemas.client import SchemaRegistryClient
from schemas.shipped import shipped_schema_text

#: The demo's topics and their partitions.
PARTITIONS = {"page_view": 6, "click": 3, "search": 3}


def create_topics_and_schemas(
    say: Callable[[str], None], stack: LumberConfig, factor: int, lumber: str
) -> dict[str, int]:
    """Create the topics of :data:`PARTITIONS` with ``factor`` replicas each and register the schemas of
    the traffic's topics, saying each as ``lumber`` (as the user types it) would; returns the schema ids
    by topic."""
    zk = KazooClient(hosts=stack.zookeeper.connect, timeout=stack.zookeeper.session_timeout_ms / 1000)
    zk.start(timeout=stack.zookeeper.connect_timeout_ms / 1000)
    try:
        admin = TopicAdmin(zk)
        min_insync = max(1, factor - 1)
        for topic, partitions in PARTITIONS.items():
            assignment = admin.create_topic(
                topic,
                partitions,
                replication_factor=factor,
                configs={"min.insync.replicas": str(min_insync)},
            )
            leaders = sorted({replicas[0] for replicas in assignment.values()})
            say(
                f"  topic {topic:<10} {partitions} partitions x {factor} replicas, leaders on brokers "
                f"{', '.join(map(str, leaders))}   (= {lumber} topics create {topic} --partitions "
                f"{partitions} --replication-factor {factor} --config min.insync.replicas={min_insync})"
            )
        audit = stack.audit.topic
        replicas = {len(r) for r in admin.describe_topic(audit).values()}
        say(
            f"  topic {audit:<10} the producers' audit counts, {'/'.join(map(str, sorted(replicas)))} "
            f"replicas (created by `{lumber} dev up`)"
        )
        if factor > 1:
            say(
                f"  acks=all waits for every in-sync replica, and needs {min_insync} of them "
                f"(min.insync.replicas={min_insync})"
            )
    finally:
        zk.stop()
        zk.close()
    ids: dict[str, int] = {}
    with SchemaRegistryClient.from_config(stack.registry) as registry:
        for topic in TOPICS:
            ids[topic] = registry.register(f"{topic}-value", shipped_schema_text(topic))
            say(
                f"  schema {topic}-value version 1 -> id {ids[topic]}"
                f"   (= {lumber} schemas register {topic}-value schemas/avro/{topic}.avsc)"
            )
    return ids
