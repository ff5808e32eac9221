"""The ACL authorizer end to end (broker/server/authorizer.py and every API's checks: kafka_apis.py,
metadata_apis.py, group_apis.py, admin_apis.py, acl_apis.py): two real broker processes with
``authorizer = "acl"``, one SASL_PLAINTEXT listener that is also the inter-broker one (the brokers log in
as ``User:broker``, a super user), a real ZooKeeper, unmodified confluent-kafka and kafka-python clients.

One cluster serves the module (``acl_cluster``, tests/broker/server/acl_cluster.py: starting brokers is the
slow part); each test uses topics, groups and principals of its own, so that the ACLs of one do not answer
another's question. ACLs are managed through confluent-kafka's AdminClient as ``User:admin`` (a super
user), log end offsets counted as admin.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from broker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.server.inter_broker_send import InterBrokerSend
from tests.broker.server.acl_cluster import (
    DENY,
    GROUP,
    PASSWORDS,
    PREFIXED,
    TOPIC,
    AclCluster,
    acl,
    acl_cluster,
    produce,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import (
        Consumer,
        ConsumerGroupTopicPartitions,
        ElectionType,
        KafkaError,
        KafkaException,
    )
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPartition
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KafkaResourceType
    from kafka.errors import (
        ClusterAuthorizationFailedError,
        GroupAuthorizationFailedError,
        TopicAuthorizationFailedError,
    )
    from kafka.structs import OffsetAndMetadata

__all__ = ["acl_cluster"]  # the fixture

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def test_write_allowed_on_a_but_not_b(acl_cluster: AclCluster) -> None:
    for topic in ("wr-a", "wr-b", "wr-c"):
        acl_cluster.cluster.create_topic(topic, 1, {0: [0]})
    acl_cluster.allow(
        acl(TOPIC, "wr-a", "User:alice", AclOperation.WRITE),
        acl(TOPIC, "wr-b", "User:alice", AclOperation.DESCRIBE),  # sees B, may not write it
    )
    alice = acl_cluster.confluent("alice")
    assert produce(alice, "wr-a", 5) == [0] * 5
    # B: Metadata answers it, the Produce request is refused
    assert produce(alice, "wr-b", 3) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    # C: not even described: Metadata refuses it
    assert produce(alice, "wr-c", 2) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    assert [acl_cluster.log_end(t) for t in ("wr-a", "wr-b", "wr-c")] == [5, 0, 0]
    # acks=0 (served in runs on the network thread): the broker closes the connection, appends nothing
    produce(alice, "wr-b", 20, acks=0)
    assert [acl_cluster.log_end(t) for t in ("wr-a", "wr-b")] == [5, 0]

    # kafka-python with PLAIN: the same refusal
    producer = KafkaProducer(acks="all", max_block_ms=10_000, **acl_cluster.kafka_python("alice"))
    try:
        assert producer.send("wr-a", b"kp", partition=0).get(timeout=30).offset == 5
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("wr-b", b"kp", partition=0).get(timeout=30)
    finally:
        producer.close(timeout=5)
    assert [acl_cluster.log_end(t) for t in ("wr-a", "wr-b")] == [6, 0]


def test_group_read_denied(acl_cluster: AclCluster) -> None:
    acl_cluster.cluster.create_topic("gr-t", 1, {0: [0]})
    assert produce(acl_cluster.confluent("admin"), "gr-t", 3) == [0] * 3
    acl_cluster.allow(
        acl(TOPIC, "gr-t", "User:bob", AclOperation.READ),
        acl(GROUP, "gr-ok", "User:bob", AclOperation.READ),
        acl(GROUP, "gr-denied", "User:bob", AclOperation.DESCRIBE),  # finds its coordinator, cannot join
    )
    denied = Consumer(
        {**acl_cluster.confluent("bob"), "group.id": "gr-denied", "auto.offset.reset": "earliest"}
    )
    try:
        denied.subscribe(["gr-t"])
        errors: list[int] = []
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            message = denied.poll(0.5)
            error = None if message is None else message.error()
            if error is not None:
                errors.append(error.code())
        assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    finally:
        denied.close()

    allowed = Consumer({**acl_cluster.confluent("bob"), "group.id": "gr-ok", "auto.offset.reset": "earliest"})
    try:
        allowed.subscribe(["gr-t"])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 3 and time.monotonic() < deadline:
            message = allowed.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value() or b"")
        assert values == [b"v0", b"v1", b"v2"]
        allowed.commit(asynchronous=False)
    finally:
        allowed.close()

    consumer = KafkaConsumer(
        "gr-t",
        group_id="gr-denied",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **acl_cluster.kafka_python("bob"),
    )
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=10_000)
    finally:
        consumer.close()


def test_commits_and_group_administration(acl_cluster: AclCluster) -> None:
    acl_cluster.cluster.create_topic("oc-t", 1, {0: [0]})
    acl_cluster.cluster.create_topic("oc-t2", 1, {0: [0]})
    acl_cluster.allow(
        acl(GROUP, "oc-g", "User:erin", AclOperation.READ),
        acl(TOPIC, "oc-t", "User:erin", AclOperation.READ),
    )
    consumer = KafkaConsumer(group_id="oc-g", enable_auto_commit=False, **acl_cluster.kafka_python("erin"))
    try:
        consumer.commit({KafkaPartition("oc-t", 0): OffsetAndMetadata(2, "", -1)})
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.commit(
                {
                    KafkaPartition("oc-t", 0): OffsetAndMetadata(5, "", -1),
                    KafkaPartition("oc-t2", 0): OffsetAndMetadata(1, "", -1),
                }
            )
    finally:
        consumer.close()
    # the authorized partition of the refused commit was committed (as Kafka does), the other not
    admin = acl_cluster.admin()
    [committed] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("oc-g")]).values()
    assert sorted((p.topic, p.partition, p.offset) for p in committed.result(30).topic_partitions) == [
        ("oc-t", 0, 5)
    ]

    erin = AdminClient(acl_cluster.confluent("erin"))
    listed = erin.list_consumer_groups().result(30)
    assert [g.group_id for g in listed.valid] == ["oc-g"]  # only the groups it may describe
    assert "oc-g" in [g.group_id for g in admin.list_consumer_groups().result(30).valid]
    described = erin.describe_consumer_groups(["oc-g", "oc-other"])
    assert described["oc-g"].result(30).group_id == "oc-g"
    with pytest.raises(Exception) as info:
        described["oc-other"].result(30)
    assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_prefixed_acls_and_deny_beats_allow(acl_cluster: AclCluster) -> None:
    for topic in ("px-orders", "px-secret", "py-other"):
        acl_cluster.cluster.create_topic(topic, 1, {0: [1]})
    acl_cluster.allow(
        acl(TOPIC, "px-", "User:alice", AclOperation.WRITE, pattern=PREFIXED),
        acl(TOPIC, "px-secret", "User:*", AclOperation.WRITE, DENY),
    )
    alice = acl_cluster.confluent("alice")
    assert produce(alice, "px-orders", 4) == [0] * 4
    assert produce(alice, "px-secret", 2) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    assert produce(alice, "py-other", 2) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    assert [acl_cluster.log_end(t) for t in ("px-orders", "px-secret", "py-other")] == [4, 0, 0]


def test_a_super_user_needs_no_acl(acl_cluster: AclCluster) -> None:
    acl_cluster.cluster.create_topic("su-t", 1, {0: [1]})
    assert produce(acl_cluster.confluent("admin"), "su-t", 3) == [0] * 3
    admin = acl_cluster.admin()
    created = admin.create_topics([NewTopic("su-created", 1, 1)])
    assert created["su-created"].result(30) is None
    alice = AdminClient(acl_cluster.confluent("alice"))
    refused = alice.create_topics([NewTopic("su-refused", 1, 1)])
    with pytest.raises(Exception) as info:
        refused["su-refused"].result(30)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert acl_cluster.log_end("su-t") == 3


def test_metadata_lists_only_describable_topics(acl_cluster: AclCluster) -> None:
    for topic in ("md-visible", "md-pre-1", "md-hidden"):
        acl_cluster.cluster.create_topic(topic, 1, {0: [0]})
    acl_cluster.allow(
        acl(TOPIC, "md-visible", "User:carol", AclOperation.READ),  # READ implies DESCRIBE
        acl(TOPIC, "md-pre-", "User:carol", AclOperation.DESCRIBE, pattern=PREFIXED),
    )
    carol = AdminClient(acl_cluster.confluent("carol"))
    admin = acl_cluster.admin()
    assert sorted(carol.list_topics(timeout=30).topics) == ["md-pre-1", "md-visible"]
    hidden = carol.list_topics(topic="md-hidden", timeout=30).topics["md-hidden"]
    assert hidden.error is not None
    assert hidden.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "md-hidden" in admin.list_topics(timeout=30).topics


def test_admin_client_creates_lists_and_deletes_acls_and_both_brokers_follow(acl_cluster: AclCluster) -> None:
    acl_cluster.cluster.create_topic("fol-0", 1, {0: [0]})
    acl_cluster.cluster.create_topic("fol-1", 1, {0: [1]})
    bindings = [
        acl(TOPIC, "fol-", "User:dave", AclOperation.WRITE, pattern=PREFIXED),
        acl(TOPIC, "fol-0", "User:dave", AclOperation.READ),
    ]
    admin = acl_cluster.admin(broker=0)
    for future in admin.create_acls(bindings).values():
        assert future.result(30) is None
    # ZooKeeper holds them in Kafka's layout, with a change notification each
    zk = acl_cluster.cluster.zk
    literal, _ = zk.get("/kafka-acl/Topic/fol-0")
    prefixed, _ = zk.get("/kafka-acl-extended/prefixed/Topic/fol-")
    assert json.loads(literal) == {
        "acls": [{"host": "*", "operation": "Read", "permissionType": "Allow", "principal": "User:dave"}],
        "version": 1,
    }
    assert json.loads(prefixed)["acls"] == [
        {"host": "*", "operation": "Write", "permissionType": "Allow", "principal": "User:dave"}
    ]
    assert b"Topic:fol-0" in [
        zk.get(f"/kafka-acl-changes/{n}")[0] for n in zk.get_children("/kafka-acl-changes")
    ]

    dave_filter = AclBindingFilter(
        ResourceType.ANY,
        None,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        "User:dave",
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for broker in (0, 1):  # each broker answers from its own copy
        one = acl_cluster.admin(broker=broker)
        described = one.describe_acls(dave_filter).result(30)
        assert sorted(described) == sorted(bindings)

    # each broker's cache has the prefixed ACL: dave writes to a partition led by each
    dave = acl_cluster.confluent("dave")
    assert produce(dave, "fol-0", 2) == [0, 0]
    assert produce(dave, "fol-1", 2) == [0, 0]

    deleted = admin.delete_acls([dave_filter])[dave_filter].result(30)
    assert sorted(deleted) == sorted(bindings)
    deadline = time.monotonic() + 20
    codes = produce(dave, "fol-1", 1)
    while codes != [KafkaError.TOPIC_AUTHORIZATION_FAILED] and time.monotonic() < deadline:
        time.sleep(0.2)
        codes = produce(dave, "fol-1", 1)
    assert codes == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce(dave, "fol-0", 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert [acl_cluster.log_end("fol-0"), acl_cluster.log_end("fol-1")] == [2, 2]
    one = acl_cluster.admin(broker=1)
    assert one.describe_acls(dave_filter).result(30) == []
    assert not zk.exists("/kafka-acl/Topic/fol-0")

    # a principal without ALTER on the cluster may not change ACLs
    dave_admin = AdminClient(acl_cluster.confluent("dave"))
    refused = dave_admin.create_acls([bindings[0]])
    with pytest.raises(Exception) as info:
        refused[bindings[0]].result(30)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # nor list them (librdkafka drops DescribeAcls' error and answers an empty list: kafka-python raises it)
    dave_python = KafkaAdminClient(**acl_cluster.kafka_python("dave"))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            dave_python.describe_acls(
                ACLFilter(
                    None,
                    None,
                    ACLOperation.ANY,
                    ACLPermissionType.ANY,
                    ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY),
                )
            )
    finally:
        dave_python.close()


def test_replication_between_brokers_with_the_authorizer_on(acl_cluster: AclCluster, tmp_path: Path) -> None:
    acl_cluster.cluster.create_topic(
        "rep-t", 1, {0: [0, 1]}, replication_factor=2, configs={"min.insync.replicas": "2"}
    )
    # acks=all with min.insync.replicas=2: answered only once broker 1, logged in as User:broker, has it
    assert produce(acl_cluster.confluent("admin"), "rep-t", 20) == [0] * 20
    assert acl_cluster.log_end("rep-t") == 20
    assert sorted(acl_cluster.cluster.state_of("rep-t", 0).isr) == [0, 1]

    # a follower's Fetch from a principal without CLUSTER_ACTION: refused, nothing read
    password_file = tmp_path / "alice.password"
    password_file.write_text(PASSWORDS["alice"])
    send = InterBrokerSend(
        0,
        "127.0.0.1",
        acl_cluster.ports[0],
        client_id="not-a-broker",
        sasl=("SCRAM-SHA-512", "alice", str(password_file)),
    )
    try:
        response = send.send_and_receive(
            FetchRequest(
                replica_id=1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                topics=[
                    FetchTopic(
                        topic="rep-t",
                        partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
                    )
                ],
            )
        )
    finally:
        send.close()
    [topic] = response.responses
    [partition] = topic.partitions
    assert partition.error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert bytes(partition.records) == b""


def test_idempotent_producers_need_write_somewhere(acl_cluster: AclCluster) -> None:
    acl_cluster.cluster.create_topic("idem-t", 1, {0: [0]})
    acl_cluster.allow(
        acl(TOPIC, "idem-t", "User:carol", AclOperation.WRITE),  # WRITE on a topic: InitProducerId allowed
        acl(TOPIC, "idem-t", "User:erin", AclOperation.READ),
    )
    assert produce(acl_cluster.confluent("carol"), "idem-t", 3, **{"enable.idempotence": True}) == [0] * 3
    # erin may write nothing: InitProducerId is refused, which librdkafka raises as a fatal error
    with pytest.raises(KafkaException) as info:
        produce(acl_cluster.confluent("erin"), "idem-t", 1, **{"enable.idempotence": True})
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert info.value.args[0].fatal()
    assert acl_cluster.log_end("idem-t") == 3


def test_no_password_in_any_broker_log(acl_cluster: AclCluster) -> None:
    for broker in acl_cluster.cluster.brokers:
        log = broker.log()
        assert "denied" in log or "ACLs" in log  # the log is the broker's, with the authorizer's lines
        assert [user for user, password in PASSWORDS.items() if password in log] == []
        config = broker.config_path.read_text()
        assert PASSWORDS["broker"] not in config  # a file's path, not the password


def code_of(future: Any) -> int:
    """The error code a future of confluent-kafka's AdminClient ends with (0: none)."""
    try:
        future.result(30)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def test_admin_requests_need_their_operations(acl_cluster: AclCluster) -> None:
    acl_cluster.cluster.create_topic("adm-x", 1, {0: [0]})
    acl_cluster.cluster.create_topic("adm-y", 1, {0: [0]})
    acl_cluster.allow(
        acl(TOPIC, "adm-y", "User:carol", AclOperation.ALTER_CONFIGS)
    )  # implies DescribeConfigs
    carol = AdminClient(acl_cluster.confluent("carol"))
    topic_x = ConfigResource(ResourceType.TOPIC, "adm-x")
    topic_y = ConfigResource(ResourceType.TOPIC, "adm-y")
    broker = ConfigResource(ResourceType.BROKER, "0")
    described = carol.describe_configs([topic_x, topic_y, broker])
    assert [code_of(described[r]) for r in (topic_x, topic_y, broker)] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        0,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    ]
    assert code_of(carol.delete_topics(["adm-x"])["adm-x"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grown = carol.create_partitions([NewPartitions("adm-x", 2)])
    assert code_of(grown["adm-x"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    deleted = carol.delete_consumer_groups(["gr-ok"])
    assert code_of(deleted["gr-ok"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # nothing changed: both topics are there with one partition each, the group still has its offsets
    admin = acl_cluster.admin()
    topics = admin.list_topics(timeout=30).topics
    assert [len(topics[t].partitions) for t in ("adm-x", "adm-y")] == [1, 1]
    moves = KafkaAdminClient(**acl_cluster.kafka_python("carol"))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            moves.list_partition_reassignments()
    finally:
        moves.close()


def test_log_admin_requests_need_their_operations(acl_cluster: AclCluster) -> None:
    acl_cluster.cluster.create_topic("ladm", 1, {0: [0]})
    assert produce(acl_cluster.confluent("admin"), "ladm", 4) == [0] * 4
    acl_cluster.allow(acl(TOPIC, "ladm", "User:dave", AclOperation.DESCRIBE))  # sees it, nothing more
    dave = AdminClient(acl_cluster.confluent("dave"))
    deleted = dave.delete_records([ConfluentPartition("ladm", 0, 2)])
    assert [code_of(f) for f in deleted.values()] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    elected = dave.elect_leaders(ElectionType.PREFERRED, [ConfluentPartition("ladm", 0)])
    assert code_of(elected) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # nothing deleted: every record still readable from offset 0
    watermarks = Consumer({**acl_cluster.confluent("admin"), "group.id": "ladm-probe"})
    try:
        assert watermarks.get_watermark_offsets(ConfluentPartition("ladm", 0), timeout=10) == (0, 4)
    finally:
        watermarks.close()
    kafka_python = KafkaAdminClient(**acl_cluster.kafka_python("dave"))
    try:
        # kafka-python drops DescribeLogDirs' top-level error: no dir is shown on either broker
        assert kafka_python.describe_log_dirs() == [
            {"broker": 0, "log_dirs": []},
            {"broker": 1, "log_dirs": []},
        ]
        with pytest.raises(TopicAuthorizationFailedError, match="User:dave may not Read topic 'ladm'"):
            kafka_python.describe_producers([KafkaPartition("ladm", 0)])
    finally:
        kafka_python.close()
