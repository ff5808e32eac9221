"""Real Kafka admin clients against real brokers: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs
through confluent-kafka's AdminClient (librdkafka) and kafka-python's KafkaAdminClient, checked against
ZooKeeper's ``/config/topics/<topic>``."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import pytest

from broker.cluster import zk_paths
from tests.support.broker_cluster import BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewTopic,
    )
    from kafka.admin import ConfigResource as KafkaConfigResource
    from kafka.admin import ConfigResourceType as KafkaConfigResourceType
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.interop

TIMEOUT_S = 30


def stored(cluster: BrokerCluster, topic: str) -> dict[str, str]:
    """The topic's overrides as ZooKeeper holds them."""
    data, _ = cluster.zk.get(zk_paths.topic_config_path(topic))
    return zk_paths.decode_topic_config(zk_paths.topic_config_path(topic), data)


def describe(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)  # type: ignore[no-any-return]


def admin_client(cluster: BrokerCluster) -> AdminClient:
    """confluent-kafka's admin client, once its metadata names every broker: a BROKER resource is sent to
    that broker, and librdkafka does not ask again soon if its first Metadata came from a broker whose own
    view did not list itself yet (it registers after it starts watching)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    wanted = {b.broker_id for b in cluster.brokers}
    wait_for(lambda: set(admin.list_topics(timeout=10).brokers) == wanted, TIMEOUT_S, f"metadata of {wanted}")
    return admin


def legacy_alter(admin: AdminClient, resource: Any, **kwargs: Any) -> None:
    """confluent-kafka's ``alter_configs`` (AlterConfigs, deprecated in favour of the incremental one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        futures = admin.alter_configs([resource], request_timeout=TIMEOUT_S, **kwargs)
    futures[resource].result(TIMEOUT_S)


def test_confluent_kafka_describes_alters_and_incrementally_alters_topic_configs(start_cluster: Any) -> None:
    cluster: BrokerCluster = start_cluster(1, segment_bytes=1_000_000)
    admin = admin_client(cluster)
    created = admin.create_topics(
        [NewTopic("cfg", num_partitions=1, replication_factor=1, config={"retention.ms": "3600000"})],
        request_timeout=TIMEOUT_S,
    )
    created["cfg"].result(TIMEOUT_S)

    configs = describe(admin, "cfg")
    assert sorted(configs) == [
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "max.message.bytes",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.ms",
        "unclean.leader.election.enable",
    ]
    got = {name: (e.value, e.source, e.is_default, e.is_read_only) for name, e in configs.items()}
    assert got["retention.ms"] == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False, False)
    assert got["segment.bytes"] == ("1000000", ConfigSource.STATIC_BROKER_CONFIG.value, False, False)
    assert got["cleanup.policy"] == ("delete", ConfigSource.DEFAULT_CONFIG.value, True, False)
    assert got["max.message.bytes"] == ("1048588", ConfigSource.DEFAULT_CONFIG.value, True, False)
    synonyms = [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms.values()]
    assert synonyms == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG.value),
    ]

    # incremental: SET two keys, APPEND to the list-typed cleanup.policy; retention.ms stays
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("segment.bytes", "65536", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    assert stored(cluster, "cfg") == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "3600000",
        "segment.bytes": "65536",
    }
    configs = describe(admin, "cfg")
    assert (configs["segment.bytes"].value, configs["segment.bytes"].source) == (
        "65536",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert configs["cleanup.policy"].value == "compact,delete"

    # SUBTRACT and DELETE
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    assert stored(cluster, "cfg") == {"cleanup.policy": "compact", "segment.bytes": "65536"}

    # a bad value: refused with the message naming topic, key and value; nothing written
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("segment.bytes", "12", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    error = refused.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert error.str() == "topic 'cfg': segment.bytes='12': expected an integer from 128 to 2147483647"
    # APPEND to a key that is not a list
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    with pytest.raises(
        KafkaException, match=r"retention.ms: APPEND is only for list configs \(cleanup.policy\)"
    ):
        admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    assert stored(cluster, "cfg") == {"cleanup.policy": "compact", "segment.bytes": "65536"}

    # validate_only: checked, nothing changes
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("segment.bytes", "131072", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([resource], validate_only=True, request_timeout=TIMEOUT_S)[
        resource
    ].result(TIMEOUT_S)
    assert stored(cluster, "cfg") == {"cleanup.policy": "compact", "segment.bytes": "65536"}

    # AlterConfigs replaces the whole set
    resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg", set_config={"retention.bytes": "1000000"})
    legacy_alter(admin, resource)
    assert stored(cluster, "cfg") == {"retention.bytes": "1000000"}
    assert describe(admin, "cfg")["segment.bytes"].value == "1000000"  # the broker's again

    # unknown topic, unknown key
    resource = ConfigResource(ConfigResource.Type.TOPIC, "nope")
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg", set_config={"preallocate": "true"})
    with pytest.raises(KafkaException) as refused:
        legacy_alter(admin, resource)
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    assert refused.value.args[0].str() == (
        "topic 'cfg': Lumber does not read the topic config 'preallocate' (accepted: cleanup.policy, "
        "compression.gzip.level, compression.lz4.level, compression.type, compression.zstd.level, "
        "delete.retention.ms, max.message.bytes, message.timestamp.type, "
        "min.cleanable.dirty.ratio, min.compaction.lag.ms, min.insync.replicas, retention.bytes, "
        "retention.ms, segment.bytes, segment.ms, unclean.leader.election.enable); set the others in "
        "lumber.toml"
    )


def test_confluent_kafka_describes_the_broker_read_only_and_refuses_altering_it(start_cluster: Any) -> None:
    cluster: BrokerCluster = start_cluster(1, retention_ms=3_600_000)
    admin = admin_client(cluster)
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == (
        "3600000",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )
    assert configs["broker.id"].value == "0"
    assert configs["num.io.threads"].value == "3"
    assert configs["log.cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert all(e.is_read_only for e in configs.values())
    resource = ConfigResource(ConfigResource.Type.BROKER, "0", set_config={"log.retention.ms": "1"})
    with pytest.raises(KafkaException) as refused:
        legacy_alter(admin, resource)
    assert refused.value.args[0].name() == "INVALID_REQUEST"
    assert refused.value.args[0].str() == (
        "broker 0: Lumber's broker configs are read-only over the protocol; they live in lumber.toml "
        "([broker] and [log]): change them there and restart the broker"
    )


def test_kafka_python_describes_and_alters_topic_configs(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("kp", 1, configs={"max.message.bytes": "500000"})
    admin = KafkaAdminClient(bootstrap_servers=broker_cluster.bootstrap_servers, request_timeout_ms=30_000)
    try:
        topic = KafkaConfigResource(KafkaConfigResourceType.TOPIC, "kp")
        described = admin.describe_configs([topic], config_filter="all")["topic"]["kp"]
        assert described["max.message.bytes"]["value"] == "500000"
        assert described["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert described["segment.ms"]["value"] == "604800000"
        assert described["segment.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert described["segment.ms"]["read_only"] is False
        modified = admin.describe_configs([topic])["topic"]["kp"]
        assert sorted(modified) == ["max.message.bytes"]

        # incremental (kafka-python's default when the broker offers IncrementalAlterConfigs)
        result = admin.alter_configs(
            [KafkaConfigResource(KafkaConfigResourceType.TOPIC, "kp", configs={"retention.ms": "60000"})]
        )
        assert result == {"topic": {"kp": "OK"}}
        assert stored(broker_cluster, "kp") == {"max.message.bytes": "500000", "retention.ms": "60000"}

        # legacy AlterConfigs: kafka-python sends the other modified keys along
        result = admin.alter_configs(
            [KafkaConfigResource(KafkaConfigResourceType.TOPIC, "kp", configs={"segment.ms": "1000"})],
            incremental=False,
        )
        assert result == {"topic": {"kp": "OK"}}
        assert stored(broker_cluster, "kp") == {
            "max.message.bytes": "500000",
            "retention.ms": "60000",
            "segment.ms": "1000",
        }

        # a bad value, and validate_only
        result = admin.alter_configs(
            [KafkaConfigResource(KafkaConfigResourceType.TOPIC, "kp", configs={"min.insync.replicas": "2"})]
        )
        assert result == {
            "topic": {
                "kp": "[Error 40] InvalidConfigurationError: topic 'kp': min.insync.replicas='2': with "
                "replication factor 1 it must be an integer from 1 to 1 (a larger one would refuse every "
                "acks=all write)"
            }
        }
        result = admin.alter_configs(
            [KafkaConfigResource(KafkaConfigResourceType.TOPIC, "kp", configs={"retention.ms": "1"})],
            validate_only=True,
        )
        assert result == {"topic": {"kp": "OK"}}
        assert stored(broker_cluster, "kp")["retention.ms"] == "60000"
    finally:
        admin.close()


def test_concurrent_alters_from_two_clients_lose_no_key(broker_cluster: BrokerCluster) -> None:
    """Two clients, each setting its own 20 keys' worth of changes one at a time: every one lands (the
    writes are compare-and-set on the config znode; a blind write would lose some)."""
    broker_cluster.create_topic("race", 1)
    keys = {
        0: ["retention.ms", "segment.ms", "delete.retention.ms", "min.compaction.lag.ms"],
        1: ["retention.bytes", "segment.bytes", "max.message.bytes", "min.cleanable.dirty.ratio"],
    }
    errors: list[BaseException] = []
    rounds = 10

    def client(which: int) -> None:
        try:
            admin = AdminClient({"bootstrap.servers": broker_cluster.bootstrap_servers})
            for i in range(rounds):
                for key in keys[which]:
                    value = "0.25" if key == "min.cleanable.dirty.ratio" else str(1_000_000 + i)
                    resource = ConfigResource(
                        ConfigResource.Type.TOPIC,
                        "race",
                        incremental_configs=[
                            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                        ],
                    )
                    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(
                        TIMEOUT_S
                    )
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    last = str(1_000_000 + rounds - 1)
    assert stored(broker_cluster, "race") == {
        "delete.retention.ms": last,
        "max.message.bytes": last,
        "min.cleanable.dirty.ratio": "0.25",
        "min.compaction.lag.ms": last,
        "retention.bytes": last,
        "retention.ms": last,
        "segment.bytes": last,
        "segment.ms": last,
    }
    _, stat = broker_cluster.zk.get(zk_paths.topic_config_path("race"))
    assert stat.version == 2 * 4 * rounds - 1  # created by the first alter, then one set per alter
