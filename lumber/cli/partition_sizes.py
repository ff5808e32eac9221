"""The bytes a reassignment plan copies: each partition's size on its leader, asked of the brokers.

A move copies the partition's log to every replica it adds, so it copies ``size x added`` bytes, where
``size`` is the partition's log on its current leader (the replica the new ones fetch from) and ``added``
the brokers in the target that do not hold the partition now; a move that only reorders the replicas (a
new preferred leader) copies nothing. This is what Kafka's ``kafka-reassign-partitions`` and Cruise
Control report as data to move.

Sizes come from DescribeLogDirs (key 35; every partition of the broker's dirs, ``partition_size`` the bytes
of its segment files), asked of each broker that leads a moving partition, over a connection made as
``lumber consume`` makes its own: ``[consumer]``'s security keys (TLS, SASL), client id and timeouts, to
the broker's first advertised listener of that security protocol. With an authorizer the principal needs
DESCRIBE on the cluster; a broker that refuses (CLUSTER_AUTHORIZATION_FAILED), cannot be reached, has no
listener of the client's protocol, or a moving partition without a leader: :meth:`PartitionSizes.read`
gives no sizes at all and a one-line reason, and the plan is printed without them (never a crash).

One request per broker, one broker at a time, each connection closed after its answer: no threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.client.consumer.consumer_config import ConsumerConfig
    from broker.cluster.broker_info import BrokerInfo
    from broker.record.topic_partition import TopicPartition


@dataclass(frozen=True)
class PartitionSizes:
    """The leaders' partition sizes, or why there are none (see the module docstring)."""

    #: partition -> bytes of its log on its leader; empty when ``unknown_because`` says why
    sizes: Mapping[TopicPartition, int]
    unknown_because: str = ""

    @classmethod
    def read(
        cls,
        leaders: Mapping[TopicPartition, int],
        brokers: Mapping[int, BrokerInfo],
        settings: ConsumerConfig,
        *,
        all_required: bool = True,
    ) -> PartitionSizes:
        """The size of each partition of ``leaders`` (partition -> leader, -1: none) on its leader. With
        ``all_required=False`` a broker that holds no log of a partition (a replica being added, its log not
        made yet) leaves that partition out of the sizes instead of failing the whole read."""
        from broker.client.errors import ClientError
        from broker.client.network.connection import BrokerConnection
        from broker.endpoint import SecurityProtocol
        from broker.protocol.error_code import ErrorCode
        from broker.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
        from broker.record.topic_partition import TopicPartition

        leaderless = sorted(tp for tp, leader in leaders.items() if leader < 0)
        if leaderless:
            return cls({}, f"{leaderless[0]} has no leader to ask its size")
        try:
            security = settings.client_security("consumer")
        except ClientError as exc:
            return cls({}, str(exc))
        by_leader: dict[int, dict[str, list[int]]] = {}
        for tp, leader in leaders.items():
            by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
        sizes: dict[TopicPartition, int] = {}
        for broker_id, topics in sorted(by_leader.items()):
            info = brokers.get(broker_id)
            if info is None:
                return cls({}, f"broker {broker_id}, a leader, is not registered")
            if info.endpoints or security.protocol is not SecurityProtocol.PLAINTEXT:
                chosen = next((e for e in info.endpoints if e.security_protocol is security.protocol), None)
                if chosen is None:
                    return cls(
                        {},
                        f"broker {broker_id} has no {security.protocol.value} listener ([consumer] "
                        "security_protocol)",
                    )
                host, port = chosen.host, chosen.port
            else:
                host, port = info.host, info.port
            connection = BrokerConnection(
                host,
                port,
                node_id=broker_id,
                client_id=settings.client_id,
                request_timeout_ms=settings.request_timeout_ms,
                connect_timeout_ms=settings.connect_timeout_ms,
                security=security,
            )
            request = DescribeLogDirsRequest(
                topics=[DescribableLogDirTopic(t, sorted(ps)) for t, ps in sorted(topics.items())]
            )
            try:
                connection.connect()
                response = connection.request(request)
            except ClientError as exc:
                return cls({}, f"DescribeLogDirs to broker {broker_id}: {exc}")
            finally:
                connection.close()
            if response.error_code != 0:
                refused = ErrorCode.name_of(response.error_code)
                hint = (
                    " (it needs DESCRIBE on the cluster)"
                    if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    else ""
                )
                return cls({}, f"broker {broker_id} answers DescribeLogDirs with {refused}{hint}")
            for result in response.results:
                for topic in result.topics:
                    for partition in topic.partitions:
                        tp = TopicPartition(topic.name, partition.partition_index)
                        if leaders.get(tp) == broker_id and not partition.is_future_key:
                            sizes[tp] = sizes.get(tp, 0) + partition.partition_size
            missing = sorted(
                TopicPartition(t, p)
                for t, ps in topics.items()
                for p in ps
                if TopicPartition(t, p) not in sizes
            )
            if missing and all_required:
                return cls({}, f"broker {broker_id}, its leader, reports no log of {missing[0]}")
        return cls(sizes)

    def copied(self, tp: TopicPartition, current: tuple[int, ...], target: tuple[int, ...]) -> int | None:
        """The bytes moving ``tp`` from ``current`` to ``target`` copies; None when sizes are unknown."""
        if self.unknown_because:
            return None
        added = len(set(target) - set(current))
        return self.sizes.get(tp, 0) * added if added else 0
