"""Idempotent producer ids, unique across brokers and restarts (Kafka's ``ZkProducerIdManager``).

A broker hands out producer ids from a block of :data:`PRODUCER_ID_BLOCK_SIZE` consecutive ids that it
claimed in ZooKeeper at ``/latest_producer_id_block`` (:mod:`broker.cluster.zk_paths`). Claiming a block:

1. read the node and its znode version (absent: the first block is ``[0, 999]``);
2. the next block starts right after the node's ``block_end``;
3. write it with ``set(path, data, version)``, a compare-and-set: if another broker claimed a block in
   between, the version moved, the write fails with BadVersion, and the claim starts over at 1 (an absent
   node is created instead; a concurrent creator makes that fail with NodeExists, and it starts over too).

So every block is claimed by exactly one broker, and a broker that restarts claims a new block: an id is
never given out twice. A claim whose reply was lost (connection loss) is retried from step 1; the lost
block is simply never used. Ids left in a block when its broker stops are never used either.

Thread-safe: :meth:`ProducerIdManager.generate_producer_id` may be called by any number of handler threads;
one lock guards the current block (a claim, which talks to ZooKeeper, happens under it once per 1000 ids).
"""

from __future__ import annotations

import logging
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from broker.cluster import zk_paths
from broker.cluster.errors import ZooKeeperError, zookeeper_error

logger = logging.getLogger(__name__)

#: Ids per claim, as Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``.
PRODUCER_ID_BLOCK_SIZE = 1000
#: Give up claiming after this long (connection loss, or contention that never lets a CAS through).
CLAIM_DEADLINE_S = 15.0
_MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdManager:
    """Hands out producer ids from blocks claimed in ZooKeeper (see the module docstring)."""

    def __init__(
        self, client: KazooClient, broker_id: int, *, block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> None:
        if block_size < 1:
            raise ValueError(f"block_size {block_size} must be at least 1")
        self._client = client
        self._broker_id = broker_id
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next_id = 0
        self._block_end = -1  # inclusive; below _next_id: no block yet

    def generate_producer_id(self) -> int:
        """A producer id no broker has handed out before; :class:`ZooKeeperError` if no block can be claimed
        (retriable: REQUEST_TIMED_OUT, which clients retry)."""
        with self._lock:
            if self._next_id > self._block_end:
                self._next_id, self._block_end = self._claim_block()
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

    def _claim_block(self) -> tuple[int, int]:
        path = zk_paths.PRODUCER_ID_BLOCK_PATH
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=CLAIM_DEADLINE_S)
        try:
            start, end = retry(self._try_claim)
        except (KazooException, KazooTimeoutError, zk_paths.ZkDataError) as exc:
            raise zookeeper_error("claim a producer id block at", path, exc) from exc
        logger.info("broker %d claimed producer ids [%d, %d] (%s)", self._broker_id, start, end, path)
        return start, end

    def _try_claim(self) -> tuple[int, int]:
        """One claim attempt; loops on lost races (BadVersion, NodeExists), kazoo retries connection loss."""
        path = zk_paths.PRODUCER_ID_BLOCK_PATH
        while True:
            try:
                data, stat = self._client.get(path)
            except NoNodeError:
                start, end = 0, self._block_size - 1
                try:
                    self._client.create(
                        path, zk_paths.encode_producer_id_block(self._broker_id, start, end), makepath=True
                    )
                except NodeExistsError:
                    continue
                return start, end
            _, _, last_end = zk_paths.decode_producer_id_block(path, data)
            if last_end > _MAX_PRODUCER_ID - self._block_size:
                raise ZooKeeperError(
                    f"{path}: every producer id has been handed out (the last block ends at {last_end})",
                    path=path,
                )
            start, end = last_end + 1, last_end + self._block_size
            try:
                self._client.set(
                    path, zk_paths.encode_producer_id_block(self._broker_id, start, end), version=stat.version
                )
            except BadVersionError:
                continue
            return start, end
