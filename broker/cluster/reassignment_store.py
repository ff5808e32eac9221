"""ZooKeeper writes of partition reassignments: the controller's moves and ``/admin/reassign_partitions``.

Pure ZooKeeper: :mod:`broker.server.partition_reassigner` decides, this module writes
(:mod:`broker.cluster.zk_paths` documents both nodes).

* :func:`write_moves` is the controller's one write of a step of one topic's moves (Kafka's U1+A1, or
  B3-B6, of ``onPartitionReassignment``): a multi of ``check(/controller_epoch, version)``, ``set`` of the
  topic node (RS, AR, RR) at the version read, and ``set`` of each partition's state (the bumped leader
  epoch, a new leader, the ISR without the removed replicas) at the version read. The assignment and the
  states change together or not at all, so a broker never sees a leader epoch bumped for replicas it does
  not know, and a controller that lost its office writes nothing (:class:`ControllerMovedError`). A version
  that moved meanwhile (an ISR change, a new partition) loses the whole write: the controller reads again.
* :func:`read_requests`, :func:`finish_requests` (the controller) and :func:`request_reassignment`
  (``lumber cluster reassign --execute``) read and write ``/admin/reassign_partitions``.

Thread-safe: functions of their arguments; never call them on kazoo's callback threads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster import zk_paths
from broker.cluster.errors import ControllerMovedError, ZooKeeperError, zookeeper_error
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.cluster.partition_state import PartitionState
from broker.cluster.zk_transactions import first_error
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

_PATH = zk_paths.REASSIGN_PARTITIONS_PATH


def write_moves(
    client: KazooClient,
    topic: str,
    topic_zk_version: int,
    partitions: Mapping[int, PartitionReassignment],
    states: Mapping[TopicPartition, tuple[PartitionState, PartitionState]],
    controller_epoch_zk_version: int,
) -> dict[TopicPartition, PartitionState] | None:
    """Write the topic node as ``partitions`` (every partition of the topic: RS, AR, RR) and each state
    ``(old, new)``, in one multi fenced as the module docstring says.

    Returns the written states with their new znode versions, or None if the topic node or a state had
    moved on (or the topic is gone): read again. Raises ControllerMovedError, or ZooKeeperError on
    connection loss (the write may or may not have been made: read again)."""
    path = zk_paths.topic_path(topic)
    data = zk_paths.encode_assignment(
        {p: r.replicas for p, r in partitions.items()},
        {p: (r.adding, r.removing) for p, r in partitions.items() if r.moving},
    )
    transaction = client.transaction()
    transaction.check(zk_paths.CONTROLLER_EPOCH_PATH, controller_epoch_zk_version)
    transaction.set_data(path, data, version=topic_zk_version)
    order = sorted(states)
    for tp in order:
        old, new = states[tp]
        transaction.set_data(
            zk_paths.partition_state_path(tp.topic, tp.partition),
            zk_paths.encode_partition_state(new),
            version=old.zk_version,
        )
    try:
        results = transaction.commit()
    except (KazooException, KazooTimeoutError) as exc:
        raise zookeeper_error("write the reassignment of", path, exc) from exc
    if isinstance(results[0], BadVersionError | NoNodeError):
        raise ControllerMovedError(controller_epoch_zk_version)
    error = first_error(results)
    if isinstance(error, BadVersionError | NoNodeError):
        return None
    if error is not None:
        raise zookeeper_error("write the reassignment of", path, error) from error
    return {tp: states[tp][1].with_zk_version(results[2 + i].version) for i, tp in enumerate(order)}


def read_requests(client: KazooClient) -> tuple[dict[TopicPartition, tuple[int, ...]], int] | None:
    """``/admin/reassign_partitions``: partition -> target replicas and the znode version; None if there is
    no request. A node that does not hold one is logged and treated as empty (the controller deletes it)."""
    try:
        data, stat = client.get(_PATH)
    except NoNodeError:
        return None
    try:
        return zk_paths.decode_reassign_partitions(_PATH, data), stat.version
    except zk_paths.ZkDataError as exc:
        logger.error("%s; dropping the request", exc)  # noqa: TRY400 - bad data, no traceback
        return {}, stat.version


def finish_requests(
    client: KazooClient,
    done: Sequence[TopicPartition],
    controller_epoch_zk_version: int,
) -> None:
    """Remove ``done`` from ``/admin/reassign_partitions`` (Kafka's ``maybeRemoveFromZkReassignment``),
    deleting the node once nothing is left; by compare-and-set, retried while the tool adds entries."""
    for _ in range(10):
        found = read_requests(client)
        if found is None:
            return
        targets, version = found
        left = {tp: r for tp, r in targets.items() if tp not in done}
        if len(left) == len(targets) and targets:
            return
        transaction = client.transaction()
        transaction.check(zk_paths.CONTROLLER_EPOCH_PATH, controller_epoch_zk_version)
        if left:
            transaction.set_data(_PATH, zk_paths.encode_reassign_partitions(left), version=version)
        else:
            transaction.delete(_PATH, version=version)
        try:
            results = transaction.commit()
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("update", _PATH, exc) from exc
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(controller_epoch_zk_version)
        error = first_error(results)
        if error is None:
            if not left:
                logger.info("every partition of %s moved: deleted it", _PATH)
            return
        if not isinstance(error, BadVersionError | NoNodeError):
            raise zookeeper_error("update", _PATH, error) from error


def request_reassignment(
    client: KazooClient, targets: Mapping[TopicPartition, Sequence[int]], *, additional: bool = False
) -> None:
    """Write ``targets`` to ``/admin/reassign_partitions`` (the tool's ``--execute``). One pending already:
    ZooKeeperError naming it, unless ``additional`` (then ``targets`` are merged in, replacing the pending
    targets of the same partitions, by compare-and-set)."""
    data = zk_paths.encode_reassign_partitions(targets)
    for _ in range(10):
        try:
            client.create(_PATH, data, makepath=True)
        except NodeExistsError:
            pass
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("create", _PATH, exc) from exc
        else:
            return
        if not additional:
            raise ZooKeeperError(
                f"zookeeper: {_PATH} exists: a reassignment is still in progress; wait for it (--verify) "
                "or add to it with --additional",
                path=_PATH,
            )
        try:
            found = read_requests(client)
            if found is None:
                continue
            merged = {**found[0], **{tp: tuple(r) for tp, r in targets.items()}}
            client.set(_PATH, zk_paths.encode_reassign_partitions(merged), version=found[1])
        except (BadVersionError, NoNodeError):
            continue
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("update", _PATH, exc) from exc
        return
    raise ZooKeeperError(f"zookeeper: {_PATH} kept changing; try again", path=_PATH, retriable=True)
