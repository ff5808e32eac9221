"""Create, delete, list and describe topics in ZooKeeper (``/brokers/topics/<topic>`` and below).

A topic is its assignment node (partition -> replicas), its optional config node ``/config/topics/<topic>``,
and per partition ``partitions/<p>/state`` (:mod:`broker.cluster.zk_paths`). :meth:`TopicAdmin.create_topic`
writes all of them in ONE ZooKeeper transaction (a multi): the topic appears complete or not at all, and of
several concurrent creators exactly one succeeds (the others get
:class:`~broker.cluster.errors.TopicExistsError`). Each state starts as Kafka's controller would make it for
a new partition: leader = first replica, leader epoch 0, ISR = every replica, controller epoch = the current
``/controller_epoch`` (0 when no controller was ever elected). :meth:`TopicAdmin.delete_topic` deletes the
states, the partitions nodes, the config and the topic node in one transaction too. Brokers watch these
nodes (:class:`~broker.cluster.cluster_watcher.ClusterWatcher`) and create or delete their local partitions.

Where Lumber differs from Kafka: Kafka's admin writes only the assignment and config, and the controller
then creates the state nodes; Lumber writes the initial states with the topic so that a topic is usable
at once, with or without a controller. A transaction is bounded by ZooKeeper's ``jute.maxbuffer`` (1 MB
by default): a topic whose transaction would exceed :data:`TRANSACTION_MAX_BYTES` (about 2,000 partitions)
is written as the topic node first, then its states in pipelined multis of one partition each (creating)
or the states first (deleting); in between, watchers see a topic with some states missing, which is what a
topic of an older Lumber looks like, and what the controller's
:func:`~broker.cluster.partition_state_store.create_missing_states` repairs if the writer dies.

Replicas are placed with Kafka's ``assignReplicasToBrokersRackUnaware``
(:func:`~broker.cluster.replica_assignment.assign_replicas`), or by an explicit assignment whose brokers
must all be live, never twice in one partition, with every partition the same size.

Operations retry on connection loss for up to ``RETRY_DEADLINE_S``. A create whose reply was lost and whose
retry finds the node holding exactly the assignment it wrote counts as done (likewise a delete whose retry
finds no node). Thread-safe: every call is independent; the kazoo client may be shared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import ForceRetryError, KazooRetry

from broker.cluster import replication_throttle, zk_paths, zk_reads
from broker.cluster.broker_info import BrokerInfo
from broker.cluster.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NoLiveBrokersError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperError,
    zookeeper_error,
)
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.cluster.partition_state import PartitionState
from broker.cluster.replica_assignment import assign_replicas
from broker.cluster.topic_config import check_topic_configs
from broker.cluster.zk_transactions import TRANSACTION_MAX_BYTES, first_error, op_bytes
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

#: The most partitions one topic may have (a sanity bound: 10,000 is far beyond what one cluster serves).
MAX_PARTITIONS = 10_000
#: How long an operation keeps retrying through connection loss before it gives up.
RETRY_DEADLINE_S = 15.0

T = TypeVar("T")


class TopicAdmin:
    """Topic administration over a started kazoo client (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client

    @property
    def client(self) -> KazooClient:
        """The kazoo client it writes with (a :class:`~broker.cluster.topic_config_store.TopicConfigStore`
        may share it)."""
        return self._client

    def _retry(self, func: Callable[[], T]) -> T:
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=RETRY_DEADLINE_S)
        result: T = retry(func)
        return result

    def live_brokers(self) -> dict[int, BrokerInfo]:
        """The registered brokers, by id."""
        try:
            return self._retry(lambda: zk_reads.read_brokers(self._client))
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read the brokers in", zk_paths.BROKER_IDS_PATH, exc) from exc

    # ------------------------------------------------------------------------ create, add partitions

    def create_topic(
        self,
        topic: str,
        partitions: int,
        *,
        replication_factor: int = 1,
        assignment: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> dict[int, tuple[int, ...]]:
        """Create ``topic`` with ``partitions`` partitions; returns its assignment (partition -> replicas).

        Without ``assignment`` the partitions get ``replication_factor`` replicas each, placed over the live
        brokers by Kafka's rule; with one, it must map exactly ``0..partitions-1`` to lists of live brokers,
        all of one size, no broker twice in a list (``replication_factor`` is then the lists' size, as
        Kafka's CreateTopics ignores the factor of an explicit assignment). ``configs`` are written to
        ``/config/topics/<topic>``, checked first (:func:`~broker.cluster.topic_config.check_topic_configs`).

        Raises InvalidTopicError (bad name), InvalidPartitionsError (count out of ``[1, MAX_PARTITIONS]``),
        InvalidReplicaAssignmentError, InvalidReplicationFactorError, InvalidTopicConfigError,
        NoLiveBrokersError, TopicExistsError or ZooKeeperError.
        """
        validate_topic_name(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int):
            raise InvalidPartitionsError(
                f"topic {topic!r}: the partition count must be an integer, got {partitions!r}"
            )
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"topic {topic!r}: {partitions} partitions is outside [1, {MAX_PARTITIONS}]"
            )
        brokers = self.live_brokers()
        if assignment is None:
            if not brokers:
                raise NoLiveBrokersError(
                    f"cannot create topic {topic!r}: no live brokers are registered in "
                    f"{zk_paths.BROKER_IDS_PATH}"
                )
            if isinstance(replication_factor, bool) or not 1 <= replication_factor <= len(brokers):
                raise InvalidReplicationFactorError(topic, replication_factor, sorted(brokers))
            chosen = assign_replicas(partitions, replication_factor, list(brokers), topic=topic)
        else:
            chosen = _checked_assignment(topic, partitions, assignment, brokers)
        checked = check_topic_configs(topic, configs or {}, len(chosen[0]))
        self._create(topic, chosen, checked or None)
        logger.debug("created topic %r: %s", topic, _describe(chosen))
        return chosen

    def _create(
        self, topic: str, assignment: dict[int, tuple[int, ...]], configs: dict[str, str] | None
    ) -> None:
        path = zk_paths.topic_path(topic)
        data = zk_paths.encode_assignment(assignment)
        attempts = 0
        for parent in (zk_paths.TOPICS_PATH, zk_paths.CONFIG_TOPICS_PATH):
            try:
                self._retry(partial(self._client.ensure_path, parent))
            except (KazooException, KazooTimeoutError) as exc:
                raise zookeeper_error("create", parent, exc) from exc

        def create_once() -> bool:
            """One transaction; True if the states still have to be written (a large topic)."""
            nonlocal attempts
            attempts += 1
            controller_epoch = read_controller_epoch(self._client)[0]
            states = [
                (
                    p,
                    zk_paths.encode_partition_state(
                        PartitionState(replicas[0], 0, replicas, controller_epoch)
                    ),
                )
                for p, replicas in sorted(assignment.items())
            ]
            size = op_bytes(path, data) + sum(
                op_bytes(zk_paths.partition_state_path(topic, p), state) * 2 for p, state in states
            )
            in_one = size <= TRANSACTION_MAX_BYTES
            transaction = self._client.transaction()
            transaction.create(path, data)
            if configs is not None:
                transaction.create(zk_paths.topic_config_path(topic), zk_paths.encode_topic_config(configs))
            transaction.create(zk_paths.topic_partitions_path(topic), b"")
            if in_one:
                for partition, state in states:
                    transaction.create(zk_paths.topic_partition_path(topic, partition), b"")
                    transaction.create(zk_paths.partition_state_path(topic, partition), state)
            results = transaction.commit()
            error = first_error(results)
            if isinstance(error, NodeExistsError) and results[0] is not error:
                # not the topic node: a leftover of a topic deleted by hand (its config or states)
                where = _unchrooted(self._client, transaction.operations[results.index(error)].path)
                raise ZooKeeperError(
                    f"zookeeper: cannot create topic {topic!r}: {where} exists without its topic; delete it",
                    path=where,
                )
            if isinstance(error, NodeExistsError):
                # after a lost reply, the node may be our own create: same bytes means it is
                if attempts > 1 and self._client.get(path)[0] == data:
                    return not in_one
                raise TopicExistsError(topic) from None
            if isinstance(error, NoNodeError):
                raise ForceRetryError  # a parent was deleted under us: make it again
            if error is not None:
                raise error
            return not in_one

        try:
            states_left = self._retry(create_once)
            if states_left:
                logger.info(
                    "topic %r: %d partitions exceed one transaction; writing their states in pipelined "
                    "multis",
                    topic,
                    len(assignment),
                )
                self._create_states_in_batches(topic, assignment)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("create", path, exc) from exc

    def _create_states_in_batches(self, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
        controller_epoch = read_controller_epoch(self._client)[0]
        pending = []
        for partition, replicas in sorted(assignment.items()):
            transaction = self._client.transaction()
            transaction.create(zk_paths.topic_partition_path(topic, partition), b"")
            state = PartitionState(replicas[0], 0, replicas, controller_epoch)
            transaction.create(
                zk_paths.partition_state_path(topic, partition), zk_paths.encode_partition_state(state)
            )
            pending.append((partition, transaction.commit_async()))
        for partition, result in pending:
            error = first_error(result.get(timeout=RETRY_DEADLINE_S))
            if error is not None and not isinstance(error, NodeExistsError):
                raise zookeeper_error(
                    "create", zk_paths.partition_state_path(topic, partition), error
                ) from error

    def add_partitions(
        self,
        topic: str,
        partitions: int,
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> dict[int, tuple[int, ...]]:
        """Grow ``topic`` to ``partitions`` partitions (Kafka's ``AdminZkClient.addPartitions``); returns the
        new partitions' replicas.

        They get as many replicas as partition 0, placed over the live brokers by Kafka's rule from
        partition 0's first replica on (``startPartitionId`` = the current count); their states are written
        with the topic node in one multi, conditional on the node's version (a move in progress keeps its
        ``adding_replicas``/``removing_replicas``), so a concurrent change is never lost: read again and
        retried. Raises UnknownTopicError, InvalidPartitionsError (not an increase, or above
        ``MAX_PARTITIONS``), InvalidReplicationFactorError (fewer live brokers than replicas) or
        ZooKeeperError. ``assignment`` places the new partitions (one list of live brokers per partition
        added, as many as partition 0's, no broker twice: InvalidReplicaAssignmentError); ``validate_only``
        checks everything and writes nothing (CreatePartitions).
        """
        validate_topic_name(topic)
        path = zk_paths.topic_path(topic)

        def add_once() -> dict[int, tuple[int, ...]]:
            try:
                data, stat = self._client.get(path)
            except NoNodeError:
                raise UnknownTopicError(topic) from None
            current = zk_paths.decode_assignment(path, data)
            moving = zk_paths.decode_moving(path, data)
            if not len(current) < partitions <= MAX_PARTITIONS:
                raise InvalidPartitionsError(
                    f"topic {topic!r} has {len(current)} partitions: {partitions} is not an increase "
                    f"(at most {MAX_PARTITIONS})"
                )
            live = self.live_brokers()
            brokers = sorted(live)
            factor = len(current[0])
            if assignment is not None:
                if len(assignment) != partitions - len(current):
                    raise InvalidReplicaAssignmentError(
                        f"topic {topic!r}: {len(assignment)} assignments for the {partitions - len(current)} "
                        "partitions added"
                    )
                added = {}
                for index, given in enumerate(assignment):
                    partition, replicas = len(current) + index, tuple(int(b) for b in given)
                    where = f"topic {topic!r}: new partition {partition}'s replicas {list(replicas)}"
                    if len(replicas) != factor or len(set(replicas)) != factor:
                        raise InvalidReplicaAssignmentError(
                            f"{where}: expected {factor} distinct brokers (as partition 0)"
                        )
                    dead = [b for b in replicas if b not in live]
                    if dead:
                        raise InvalidReplicaAssignmentError(
                            f"{where}: broker {dead[0]} is not live (live brokers: {brokers or 'none'})"
                        )
                    added[partition] = replicas
            else:
                if len(brokers) < factor:
                    raise InvalidReplicationFactorError(topic, factor, brokers)
                first = current[0][0]
                start = next((i for i, b in enumerate(brokers) if b >= first), 0)
                added = assign_replicas(
                    partitions - len(current),
                    factor,
                    brokers,
                    start_index=start,
                    start_partition=len(current),
                    topic=topic,
                )
            if validate_only:
                return added
            epoch = read_controller_epoch(self._client)[0]
            transaction = self._client.transaction()
            transaction.set_data(path, zk_paths.encode_assignment({**current, **added}, moving), stat.version)
            if self._client.exists(zk_paths.topic_partitions_path(topic)) is None:  # an older Lumber's topic
                transaction.create(zk_paths.topic_partitions_path(topic), b"")
            for partition, replicas in sorted(added.items()):
                transaction.create(zk_paths.topic_partition_path(topic, partition), b"")
                state = PartitionState(replicas[0], 0, replicas, epoch)
                transaction.create(
                    zk_paths.partition_state_path(topic, partition), zk_paths.encode_partition_state(state)
                )
            error = first_error(transaction.commit())
            if isinstance(error, BadVersionError | NodeExistsError | NoNodeError):
                raise ForceRetryError  # changed meanwhile (or leftovers of a lost reply): read again
            if error is not None:
                raise error
            return added

        try:
            added = self._retry(add_once)
        except zk_paths.ZkDataError as exc:
            raise zookeeper_error("decode", path, exc) from exc
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("add partitions to", path, exc) from exc
        logger.info("topic %r: added partitions %s", topic, _describe(added))
        return added

    # ----------------------------------------------------------------------------------- delete

    def delete_topic(self, topic: str) -> None:
        """Delete the topic's states, partitions, config and node in one transaction (brokers then delete
        their partitions); UnknownTopicError if it is absent."""
        validate_topic_name(topic)
        path = zk_paths.topic_path(topic)
        attempts = 0

        def delete_once() -> None:
            nonlocal attempts
            attempts += 1
            if self._client.exists(path) is None:
                if attempts == 1:
                    raise UnknownTopicError(topic)
                return  # on a retry, a missing node is our own delete whose reply was lost
            below = self._nodes_below(topic)
            size = sum(op_bytes(p) for p in below) + op_bytes(path)
            if size > TRANSACTION_MAX_BYTES:
                self._delete_states_in_batches(below)
                below = self._nodes_below(topic)
            transaction = self._client.transaction()
            for node in below:
                transaction.delete(node)
            transaction.delete(path)
            error = first_error(transaction.commit())
            if isinstance(error, (NotEmptyError, NoNodeError)):
                raise ForceRetryError  # a node was added or removed meanwhile: read again
            if error is not None:
                raise error

        try:
            self._retry(delete_once)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("delete", path, exc) from exc
        logger.debug("deleted topic %r", topic)

    def _nodes_below(self, topic: str) -> list[str]:
        """Every node of the topic besides its own, deepest first: states, partitions, the config."""
        nodes: list[str] = []
        partitions_path = zk_paths.topic_partitions_path(topic)
        partitions = zk_reads.read_children(self._client, partitions_path)
        for child in partitions:
            child_path = f"{partitions_path}/{child}"
            nodes.extend(
                f"{child_path}/{grandchild}"
                for grandchild in zk_reads.read_children(self._client, child_path)
            )
            nodes.append(child_path)
        if partitions or self._client.exists(partitions_path) is not None:
            nodes.append(partitions_path)
        config_path = zk_paths.topic_config_path(topic)
        if self._client.exists(config_path) is not None:
            nodes.append(config_path)
        return nodes

    def _delete_states_in_batches(self, nodes: Iterable[str]) -> None:
        pending = [self._client.delete_async(node) for node in nodes if node.endswith("/state")]
        for result in pending:
            try:
                result.get(timeout=RETRY_DEADLINE_S)
            except NoNodeError:
                continue

    # ----------------------------------------------------------------------------------- read

    def list_topics(self) -> list[str]:
        """The topic names, sorted."""
        try:
            return self._retry(lambda: zk_reads.read_topic_names(self._client))
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("list the topics in", zk_paths.TOPICS_PATH, exc) from exc

    def describe_topic(self, topic: str) -> dict[int, tuple[int, ...]]:
        """The topic's partition -> replicas. UnknownTopicError if it does not exist."""
        validate_topic_name(topic)
        path = zk_paths.topic_path(topic)
        try:
            assignment = self._retry(lambda: zk_reads.read_assignment(self._client, topic))
        except zk_paths.ZkDataError as exc:
            raise zookeeper_error("decode", path, exc) from exc
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", path, exc) from exc
        if assignment is None:
            raise UnknownTopicError(topic)
        return assignment

    def describe_states(self, topic: str) -> dict[int, PartitionState]:
        """Partition -> state of each partition that has a state node (one pipelined read).

        A partition without one (a topic of an older Lumber, not yet repaired by the controller) is left
        out. UnknownTopicError if the topic does not exist; ZooKeeperError naming a node that does not hold
        a state.
        """
        assignment = self.describe_topic(topic)
        tps = [TopicPartition(topic, p) for p in sorted(assignment)]
        try:
            found = self._retry(lambda: zk_reads.read_states(self._client, tps))
        except zk_paths.ZkDataError as exc:
            raise zookeeper_error("decode a state of", zk_paths.topic_partitions_path(topic), exc) from exc
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read the states of", zk_paths.topic_partitions_path(topic), exc) from exc
        return {tp.partition: state for tp, state in found.items() if state is not None}

    def describe_moves(self, topic: str) -> dict[int, PartitionReassignment]:
        """The topic's partitions moving now (RS, AR, RR; :mod:`broker.cluster.partition_reassignment`)."""
        validate_topic_name(topic)
        path = zk_paths.topic_path(topic)
        try:
            found = self._retry(lambda: zk_reads.read_assignments(self._client, [topic]))[topic]
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", path, exc) from exc
        if found is None:
            raise UnknownTopicError(topic)
        if isinstance(found, zk_paths.ZkDataError):
            raise zookeeper_error("decode", path, found)
        return {
            p: PartitionReassignment(found.assignment[p], adding, removing)
            for p, (adding, removing) in found.moving.items()
            if p in found.assignment
        }

    def throttled_partitions(self, topic: str) -> set[int]:
        """The partitions of ``topic`` in a throttled-replicas list (every one for ``*``)."""
        try:
            data, _ = self._retry(lambda: self._client.get(replication_throttle.THROTTLED_REPLICAS_PATH))
        except NoNodeError:
            return set()
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", replication_throttle.THROTTLED_REPLICAS_PATH, exc) from exc
        found = replication_throttle.throttled_partitions_of(data, topic)
        return set(self.describe_topic(topic)) if found is None else found

    def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's config overrides (``{}`` when it has none). UnknownTopicError if it does not exist."""
        self.describe_topic(topic)
        path = zk_paths.topic_config_path(topic)
        try:
            config = self._retry(lambda: zk_reads.read_topic_config(self._client, topic))
        except zk_paths.ZkDataError as exc:
            raise zookeeper_error("decode", path, exc) from exc
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", path, exc) from exc
        return config if config is not None else {}

    # ----------------------------------------------------------------------------------- elections

    def request_preferred_election(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> list[TopicPartition]:
        """Ask the controller to make each partition's first replica its leader (Kafka's
        ``/admin/preferred_replica_election``); ``None`` asks for every partition of every topic.

        Returns the partitions written. Raises ZooKeeperError with ``retriable=True`` naming the node if a
        request is already pending (the controller deletes the node when done: try again then), and
        UnknownTopicError for a partition of a topic that does not exist.
        """
        if partitions is None:
            chosen = [
                TopicPartition(topic, p)
                for topic in self.list_topics()
                for p in sorted(self._describe_or_empty(topic))
            ]
        else:
            chosen = sorted(set(partitions))
            for topic in sorted({tp.topic for tp in chosen}):
                assignment = self.describe_topic(topic)
                missing = [
                    tp.partition for tp in chosen if tp.topic == topic and tp.partition not in assignment
                ]
                if missing:
                    raise UnknownTopicError(f"{topic}-{missing[0]}")
        path = zk_paths.PREFERRED_REPLICA_ELECTION_PATH
        data = zk_paths.encode_preferred_election(chosen)
        attempts = 0

        def create_once() -> None:
            nonlocal attempts
            attempts += 1
            try:
                self._client.create(path, data, makepath=True)
            except NodeExistsError:
                if attempts > 1 and self._client.get(path)[0] == data:
                    return
                raise ZooKeeperError(
                    f"zookeeper: {path} exists: a preferred replica election is already pending",
                    path=path,
                    retriable=True,
                ) from None

        try:
            self._retry(create_once)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("create", path, exc) from exc
        logger.info("requested a preferred replica election for %d partitions", len(chosen))
        return chosen

    def _describe_or_empty(self, topic: str) -> dict[int, tuple[int, ...]]:
        try:
            return self.describe_topic(topic)
        except UnknownTopicError:
            return {}  # deleted since it was listed


def read_controller_epoch(client: KazooClient) -> tuple[int, int]:
    """``(epoch, znode version)`` of ``/controller_epoch``; ``(0, -1)`` when no controller was ever elected
    (Kafka's ``InitialControllerEpoch`` and ``InitialControllerEpochZkVersion``)."""
    try:
        data, stat = client.get(zk_paths.CONTROLLER_EPOCH_PATH)
    except NoNodeError:
        return 0, -1
    return zk_paths.decode_controller_epoch(zk_paths.CONTROLLER_EPOCH_PATH, data), stat.version


def _checked_assignment(
    topic: str, partitions: int, assignment: Mapping[int, Sequence[int]], brokers: Mapping[int, BrokerInfo]
) -> dict[int, tuple[int, ...]]:
    """``assignment`` as partition -> replicas, checked as Kafka's ``validateReplicaAssignment``: it covers
    ``0..partitions-1``, every partition has the same number (at least 1) of distinct, live brokers."""
    where = f"topic {topic!r}: assignment"
    if sorted(assignment) != list(range(partitions)):
        raise InvalidReplicaAssignmentError(
            f"{where} names partitions {sorted(assignment)}, expected 0 to {partitions - 1}"
        )
    checked: dict[int, tuple[int, ...]] = {}
    size = len(assignment[0])
    for partition in range(partitions):
        replicas = tuple(int(b) for b in assignment[partition])
        if not replicas:
            raise InvalidReplicaAssignmentError(f"{where} gives partition {partition} no replicas")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"{where} gives partition {partition} the replicas {list(replicas)}: a broker twice"
            )
        if len(replicas) != size:
            raise InvalidReplicaAssignmentError(
                f"{where} gives partition {partition} {len(replicas)} replicas {list(replicas)}, expected "
                f"{size} as partition 0"
            )
        dead = [b for b in replicas if b not in brokers]
        if dead:
            raise InvalidReplicaAssignmentError(
                f"{where} places partition {partition} on broker {dead[0]}, which is not live (live brokers: "
                f"{sorted(brokers) or 'none'})"
            )
        checked[partition] = replicas
    return checked


def _unchrooted(client: KazooClient, path: str) -> str:
    """``path`` as the caller names it (kazoo's queued operations carry the chroot prefix)."""
    chroot: str = client.chroot or ""
    return path.removeprefix(chroot) if chroot else path


def _describe(assignment: Mapping[int, Sequence[int]]) -> str:
    return ", ".join(f"{p}->{','.join(map(str, replicas))}" for p, replicas in sorted(assignment.items()))
