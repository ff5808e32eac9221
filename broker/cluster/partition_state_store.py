"""Conditional writes of partition state nodes: the leader's ISR changes and the controller's decisions.

Pure ZooKeeper writes: the server decides what to write (:mod:`broker.server`), this module writes it so
that a stale writer cannot win. Two fences, as Kafka's ``KafkaZkClient``:

1. **The state node's znode version.** Every write is ``set(state, data, version=old.zk_version)``: it
   succeeds only if nobody wrote the node since the writer read it. The leader's ISR change
   (:func:`update_isrs`, Kafka's ``Partition.shrinkIsr``/``expandIsr`` via ``updateLeaderAndIsr``) loses to
   a controller write made in between: it returns None and the leader re-reads (by then the controller's
   LeaderAndIsr, or the watcher, tells it the new state).
2. **The controller epoch's znode version.** A controller writes only in a multi that begins with
   ``check(/controller_epoch, version)``, the version it was elected with
   (:class:`~broker.cluster.controller_election.ControllerElection`). Once another controller is elected,
   the epoch node has moved and every write of the old one fails: :class:`ControllerMovedError`
   (Kafka's ``ControllerMovedException``).

:func:`update_isrs`, :func:`write_states` and :func:`create_missing_states` send all their writes (sets
or multis) before awaiting any reply, so 1,000 partitions cost about one round trip plus ZooKeeper's work.
Each write stands alone: some may succeed while others find a newer version (None in the result, the
caller re-reads those).

Thread-safe: functions of their arguments; the kazoo client may be shared. Never call them on kazoo's
callback threads (they wait for replies that those threads deliver).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster import zk_paths
from broker.cluster.errors import ControllerMovedError, zookeeper_error
from broker.cluster.partition_state import PartitionState
from broker.cluster.zk_transactions import first_error
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

#: How long one reply is awaited before the write is reported as failed.
REPLY_TIMEOUT_S = 30.0


def update_isr(
    client: KazooClient, tp: TopicPartition, state: PartitionState, new_isr: Sequence[int]
) -> PartitionState | None:
    """The leader's ISR change for one partition: :func:`update_isrs` with one entry."""
    return update_isrs(client, {tp: (state, tuple(new_isr))})[tp]


def update_isrs(
    client: KazooClient, changes: Mapping[TopicPartition, tuple[PartitionState, Sequence[int]]]
) -> dict[TopicPartition, PartitionState | None]:
    """The leader's ISR changes: for each partition, ``(state as read with its zk_version, new ISR)``, each
    written only if the node is still at ``state.zk_version``; all sent before any reply is awaited (Kafka
    batches them too: AlterPartition carries many partitions), so 1,000 followers rejoining cost about one
    round trip plus ZooKeeper's work instead of 1,000.

    Returns per partition the written state with its new ``zk_version``, or None if the node moved on
    (BadVersion: a controller or another write came first) or is gone (NoNode: the topic was deleted):
    re-read those. Raises ZooKeeperError (naming the first path whose outcome is unknown) on connection
    loss; the writes before it in the result's order may have been made.
    """
    sent = []
    for tp, (state, new_isr) in changes.items():
        path = zk_paths.partition_state_path(tp.topic, tp.partition)
        new = state.with_isr(new_isr)
        sent.append(
            (
                tp,
                path,
                state,
                new,
                client.set_async(path, zk_paths.encode_partition_state(new), state.zk_version),
            )
        )
    written: dict[TopicPartition, PartitionState | None] = {}
    failure: Exception | None = None
    for tp, path, state, new, pending in sent:
        try:
            stat = pending.get(timeout=REPLY_TIMEOUT_S)
        except (BadVersionError, NoNodeError) as exc:
            logger.info(
                "partition %s: ISR update to %s refused (%s): %s was no longer at version %d",
                tp,
                list(new.isr),
                type(exc).__name__,
                path,
                state.zk_version,
            )
            written[tp] = None
            continue
        except (KazooException, KazooTimeoutError) as exc:
            if failure is None:
                failure = zookeeper_error("update the ISR in", path, exc)
                failure.__cause__ = exc
            continue
        written[tp] = new.with_zk_version(stat.version)
    if failure is not None:
        raise failure
    return written


def write_states(
    client: KazooClient,
    updates: Mapping[TopicPartition, tuple[PartitionState, PartitionState]],
    controller_epoch_zk_version: int,
) -> dict[TopicPartition, PartitionState | None]:
    """The controller's writes: for each partition, ``(old, new)`` with ``old.zk_version`` the version it
    read; each a multi of ``check(/controller_epoch, controller_epoch_zk_version)`` and
    ``set(state, new, version=old.zk_version)``, all sent pipelined.

    Returns per partition the written state (with its new ``zk_version``), or None if its node moved on
    or is gone (re-read those). Raises :class:`ControllerMovedError` if the epoch check failed (this
    controller is no longer the controller: nothing it sent was written), ZooKeeperError on connection
    loss (some writes may have been made: re-read).
    """
    sent = []
    for tp, (old, new) in updates.items():
        transaction = client.transaction()
        transaction.check(zk_paths.CONTROLLER_EPOCH_PATH, controller_epoch_zk_version)
        transaction.set_data(
            zk_paths.partition_state_path(tp.topic, tp.partition),
            zk_paths.encode_partition_state(new),
            version=old.zk_version,
        )
        sent.append((tp, new, transaction.commit_async()))
    written: dict[TopicPartition, PartitionState | None] = {}
    moved = False
    for tp, new, pending in sent:
        path = zk_paths.partition_state_path(tp.topic, tp.partition)
        try:
            results = pending.get(timeout=REPLY_TIMEOUT_S)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("write the state", path, exc) from exc
        if isinstance(results[0], BadVersionError | NoNodeError):
            moved = True  # the epoch check is the first operation
            continue
        error = first_error(results)
        if error is None:
            written[tp] = new.with_zk_version(results[1].version)
        elif isinstance(error, BadVersionError | NoNodeError):
            written[tp] = None
        else:
            raise zookeeper_error("write the state", path, error) from error
    if moved:
        raise ControllerMovedError(controller_epoch_zk_version, _epoch_version(client))
    return written


def create_missing_states(
    client: KazooClient,
    assignments: Mapping[str, Mapping[int, Sequence[int]]],
    live_brokers: Collection[int],
    controller_epoch: int,
    controller_epoch_zk_version: int,
) -> dict[TopicPartition, PartitionState]:
    """The controller's repair of topics written by an older Lumber (or by a writer that died midway).

    For every partition in ``assignments`` (topic -> partition -> replicas; pass the partitions that the
    :class:`~broker.cluster.cluster_view.ClusterView` shows without a state) create ``partitions/<p>`` and
    its state as Kafka's controller starts a new partition (``NewPartition -> OnlinePartition``): leader =
    the first live replica, leader epoch 0, ISR = the live replicas, ``controller_epoch``. Steps:

    1. per topic, create ``partitions`` (NodeExists: fine; NoNode: the topic was deleted, skip it);
    2. per partition, pipelined: multi ``check(/controller_epoch)``, ``create(partitions/<p>)``,
       ``create(partitions/<p>/state)``;
    3. where ``partitions/<p>`` existed already, pipelined: multi ``check``, ``create(state)``. A state that
       exists already is left as it is (someone else made it).

    A partition with no live replica is skipped (logged): it stays without a state, so without a leader,
    until a replica comes back and the controller runs this again. Returns the states created, with their
    ``zk_version`` (0). Raises ControllerMovedError or ZooKeeperError as :func:`write_states`.
    """
    live = set(live_brokers)
    wanted: dict[TopicPartition, PartitionState] = {}
    for topic in sorted(assignments):
        partitions_path = zk_paths.topic_partitions_path(topic)
        try:
            client.create(partitions_path, b"")
        except NodeExistsError:
            pass
        except NoNodeError:
            logger.info("topic %r was deleted; not creating its states", topic)
            continue
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("create", partitions_path, exc) from exc
        for partition, replicas in sorted(assignments[topic].items()):
            isr = tuple(b for b in replicas if b in live)
            if not isr:
                logger.warning(
                    "partition %s-%d: no live replica among %s; leaving it without a state",
                    topic,
                    partition,
                    list(replicas),
                )
                continue
            wanted[TopicPartition(topic, partition)] = PartitionState(isr[0], 0, isr, controller_epoch)
    created: dict[TopicPartition, PartitionState] = {}
    parent_exists = _create_states(client, wanted, controller_epoch_zk_version, created, with_parent=True)
    _create_states(
        client,
        {tp: wanted[tp] for tp in parent_exists},
        controller_epoch_zk_version,
        created,
        with_parent=False,
    )
    if created:
        logger.info("created %d missing partition states", len(created))
    return created


def _create_states(
    client: KazooClient,
    states: Mapping[TopicPartition, PartitionState],
    controller_epoch_zk_version: int,
    created: dict[TopicPartition, PartitionState],
    *,
    with_parent: bool,
) -> list[TopicPartition]:
    """One pipelined round of :func:`create_missing_states`; returns the partitions whose ``<p>`` node
    existed already (``with_parent``)."""
    sent = []
    for tp, state in states.items():
        transaction = client.transaction()
        transaction.check(zk_paths.CONTROLLER_EPOCH_PATH, controller_epoch_zk_version)
        if with_parent:
            transaction.create(zk_paths.topic_partition_path(tp.topic, tp.partition), b"")
        transaction.create(
            zk_paths.partition_state_path(tp.topic, tp.partition), zk_paths.encode_partition_state(state)
        )
        sent.append((tp, state, transaction.commit_async()))
    parent_exists: list[TopicPartition] = []
    moved = False
    for tp, state, pending in sent:
        path = zk_paths.partition_state_path(tp.topic, tp.partition)
        try:
            results = pending.get(timeout=REPLY_TIMEOUT_S)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("create", path, exc) from exc
        if isinstance(results[0], BadVersionError | NoNodeError):
            moved = True
            continue
        error = first_error(results)
        if error is None:
            created[tp] = state.with_zk_version(0)
        elif with_parent and isinstance(results[1], NodeExistsError):
            parent_exists.append(tp)
        elif isinstance(error, NodeExistsError | NoNodeError):
            continue  # the state exists already, or the topic was deleted
        else:
            raise zookeeper_error("create", path, error) from error
    if moved:
        raise ControllerMovedError(controller_epoch_zk_version, _epoch_version(client))
    return parent_exists


def _epoch_version(client: KazooClient) -> str:
    """What ``/controller_epoch`` holds now, for the error message (best effort)."""
    try:
        data, stat = client.get(zk_paths.CONTROLLER_EPOCH_PATH)
    except NoNodeError:
        return "no node"
    except (KazooException, KazooTimeoutError) as exc:
        return f"unknown ({exc!r})"
    return f"version {stat.version} (epoch {data.decode(errors='replace')})"
