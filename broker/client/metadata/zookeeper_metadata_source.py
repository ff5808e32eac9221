"""Learn the cluster from ZooKeeper, the paper's registry (section 3.3), with kazoo.

Read on every refresh (the layout is the broker's, see :mod:`broker.cluster.zk_paths`)::

    /brokers/ids/<id>        {"host": "127.0.0.1", "port": 9092, "endpoints": [...]}   one per live broker
    /brokers/topics/<topic>  {"version": 1, "partitions": {"0": [1, 2], "1": [2, 1]}}   partition -> replicas
    /brokers/topics/<topic>/partitions/<p>/state   {"leader": 1, "leader_epoch": 3, "isr": [1, 2], ...}
    /controller              {"brokerid": 1, ...}

A broker is reached at its first advertised listener (``endpoints``) of the client's security protocol
(``security_protocol``, from the pool); a broker without one is left out, as if it were down. A node
without ``endpoints`` (an older broker's) is one PLAINTEXT listener at host:port.

The leader of a partition is the leader of its state node while that broker is registered; otherwise (or
while the partition has no state node yet) the partition has no leader. The states of a topic are read
pipelined (one round trip for all its partitions). ISR and leader epoch are read too, but
:class:`~broker.client.metadata.cluster_snapshot.PartitionInfo` has no fields for them yet. A topic missing
from ZooKeeper when the client may auto-create topics is asked for with a Metadata request to a live broker
(the broker creates it if its own switch allows), whose answer is used for that topic.

A kazoo session is opened when the source is made; while ZooKeeper is unreachable every refresh raises
:class:`~broker.client.errors.ZooKeeperUnavailableError` (retriable) and kazoo keeps reconnecting.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from typing import Any

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.errors import BrokerConnectionError, ZooKeeperUnavailableError
from broker.client.metadata.bootstrap_metadata_source import metadata_request, snapshot_from_response
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_snapshot import NO_LEADER, BrokerAddress, ClusterSnapshot, PartitionInfo
from broker.cluster import zk_paths, zk_reads
from broker.cluster.zookeeper_auth import new_zookeeper_client
from broker.endpoint import Endpoint, SecurityProtocol
from broker.protocol.api_key import ApiKey
from broker.protocol.error_code import ErrorCode
from broker.protocol.messages.metadata import MetadataResponse
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class ZooKeeperMetadataSource:
    """Brokers and topics read from ZooKeeper (see the module docstring)."""

    def __init__(self, connect: str, pool: BrokerPool, *, timeout_ms: int) -> None:
        self._connect = connect
        self._pool = pool
        self._client = new_zookeeper_client(hosts=connect, timeout=max(timeout_ms / 1000, 1.0))
        try:
            self._client.start(timeout=max(timeout_ms / 1000, 1.0))
        except (KazooTimeoutError, KazooException) as exc:
            self._client.close()
            raise ZooKeeperUnavailableError(f"zookeeper {connect}: cannot connect: {exc}") from exc

    def describe(self) -> str:
        return f"zookeeper {self._connect}"

    def fetch(
        self, topics: Collection[str] | None, allow_auto_create: bool, previous: ClusterSnapshot
    ) -> ClusterSnapshot:
        try:
            brokers = self._read_brokers()
            names = list(topics) if topics is not None else self._children(zk_paths.TOPICS_PATH)
            found: dict[str, tuple[PartitionInfo, ...]] = {}
            errors: dict[str, int] = {}
            for topic in names:
                partitions = self._read_topic(topic, brokers)
                if partitions is None:
                    errors[topic] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    found[topic] = partitions
        except (KazooTimeoutError, KazooException) as exc:
            raise ZooKeeperUnavailableError(f"{self.describe()}: cannot read the cluster: {exc!r}") from exc
        try:
            controller_id = zk_reads.read_controller(self._client)
        except (KazooTimeoutError, KazooException) as exc:
            raise ZooKeeperUnavailableError(
                f"{self.describe()}: cannot read the controller: {exc!r}"
            ) from exc
        snapshot = ClusterSnapshot(brokers, found, errors, controller_id)
        if errors and allow_auto_create and brokers:
            snapshot = self._auto_create(snapshot, sorted(errors))
        return snapshot

    def _children(self, path: str) -> list[str]:
        try:
            children: list[str] = self._client.get_children(path)
        except NoNodeError:
            return []
        return children

    def _read_json(self, path: str) -> Any:
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ZooKeeperUnavailableError(f"{self.describe()}: {path} does not hold JSON: {exc}") from exc

    def _read_brokers(self) -> dict[int, BrokerAddress]:
        protocol = self._pool.security.protocol
        brokers: dict[int, BrokerAddress] = {}
        for child in self._children(zk_paths.BROKER_IDS_PATH):
            path = zk_paths.broker_path(int(child))
            info = self._read_json(path)
            if info is None:  # went away between the listing and the read
                continue
            try:
                address = BrokerAddress(int(child), str(info["host"]), int(info["port"]))
                protocols = info.get("listener_security_protocol_map") or {}
                endpoints = [Endpoint.parse(str(text), protocols) for text in info.get("endpoints") or ()]
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ZooKeeperUnavailableError(
                    f"{self.describe()}: {path} lacks a host and port: {info!r}"
                ) from exc
            if endpoints or protocol is not SecurityProtocol.PLAINTEXT:
                # the broker's first listener of this client's protocol (none: the client cannot reach it)
                chosen = next((e for e in endpoints if e.security_protocol is protocol), None)
                if chosen is None:
                    continue
                address = BrokerAddress(int(child), chosen.host, chosen.port)
            brokers[int(child)] = address
        return brokers

    def _read_topic(self, topic: str, brokers: dict[int, BrokerAddress]) -> tuple[PartitionInfo, ...] | None:
        path = zk_paths.topic_path(topic)
        info = self._read_json(path)
        if info is None:
            return None
        try:
            assignment = {int(p): [int(r) for r in replicas] for p, replicas in info["partitions"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ZooKeeperUnavailableError(
                f"{self.describe()}: {path} is not a partition assignment: {info!r}"
            ) from exc
        if sorted(assignment) != list(range(len(assignment))) or not assignment:
            raise ZooKeeperUnavailableError(
                f"{self.describe()}: {path} assigns partitions {sorted(assignment)}, expected "
                f"0-{len(assignment) - 1}"
            )
        tps = [TopicPartition(topic, number) for number in range(len(assignment))]
        try:
            states = zk_reads.read_states(self._client, tps)
        except zk_paths.ZkDataError as exc:
            raise ZooKeeperUnavailableError(f"{self.describe()}: {exc}") from exc
        partitions = []
        for tp in tps:
            state = states[tp]
            leader = state.leader if state is not None and state.leader in brokers else NO_LEADER
            partitions.append(PartitionInfo(topic, tp.partition, leader, tuple(assignment[tp.partition])))
        return tuple(partitions)

    def _auto_create(self, snapshot: ClusterSnapshot, missing: list[str]) -> ClusterSnapshot:
        """Ask a live broker about ``missing`` topics with auto-creation on; merge its answer."""
        for address in snapshot.brokers.values():
            try:
                connection = self._pool.get(address)
                version = connection.api_version(int(ApiKey.METADATA))
                response: MetadataResponse = connection.request(
                    metadata_request(missing, True, version), version=version
                )
            except BrokerConnectionError as exc:
                log.info("cannot ask %s to create %s: %s", address, missing, exc)
                continue
            answer = snapshot_from_response(response)
            topics = dict(snapshot.topics)
            errors = dict(snapshot.topic_errors)
            for topic in missing:
                partitions = answer.topics.get(topic)
                if partitions:
                    topics[topic] = tuple(
                        PartitionInfo(
                            topic,
                            p.partition,
                            p.leader if p.leader in snapshot.brokers else NO_LEADER,
                            p.replicas,
                        )
                        for p in partitions
                    )
                    errors.pop(topic, None)
                else:
                    errors[topic] = answer.topic_errors.get(topic, errors[topic])
            return ClusterSnapshot(snapshot.brokers, topics, errors, snapshot.controller_id)
        return snapshot

    def close(self) -> None:
        try:
            self._client.stop()
        finally:
            self._client.close()
