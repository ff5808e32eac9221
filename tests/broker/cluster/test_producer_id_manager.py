"""Producer id blocks claimed through a real ZooKeeper: never the same id twice, across managers (brokers),
threads and restarts."""

from __future__ import annotations

import threading
from typing import Any

from broker.cluster import zk_paths
from broker.cluster.producer_id_manager import PRODUCER_ID_BLOCK_SIZE, ProducerIdManager


def test_blocks_follow_each_other_in_zookeeper(zk: Any) -> None:
    first = ProducerIdManager(zk, 1)
    assert [first.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    data, _ = zk.get(zk_paths.PRODUCER_ID_BLOCK_PATH)
    assert zk_paths.decode_producer_id_block(zk_paths.PRODUCER_ID_BLOCK_PATH, data) == (1, 0, 999)
    second = ProducerIdManager(zk, 2)
    assert second.generate_producer_id() == PRODUCER_ID_BLOCK_SIZE
    data, stat = zk.get(zk_paths.PRODUCER_ID_BLOCK_PATH)
    assert zk_paths.decode_producer_id_block(zk_paths.PRODUCER_ID_BLOCK_PATH, data) == (2, 1000, 1999)
    assert stat.version == 1
    # the first goes on in its block, then claims the next free one
    assert [first.generate_producer_id() for _ in range(PRODUCER_ID_BLOCK_SIZE - 3)][-1] == 999
    assert first.generate_producer_id() == 2000
    # "restarting" broker 1 (a new manager) never reuses its old block's unused ids
    assert ProducerIdManager(zk, 1).generate_producer_id() == 3000


def test_concurrent_brokers_never_hand_out_the_same_id(zk: Any) -> None:
    """Six managers (brokers) with small blocks race on the compare-and-set; every id is unique."""
    managers = [ProducerIdManager(zk, broker_id, block_size=7) for broker_id in range(6)]
    got: list[list[int]] = [[] for _ in managers]

    def run(index: int) -> None:
        for _ in range(60):
            got[index].append(managers[index].generate_producer_id())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(managers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    every = [pid for ids in got for pid in ids]
    assert len(every) == 360
    assert len(set(every)) == 360
    # each claimed 9 blocks of 7 (60 ids, 3 left unused in its last block): 54 blocks, ids 0 to 377
    _, _, end = zk_paths.decode_producer_id_block(
        zk_paths.PRODUCER_ID_BLOCK_PATH, zk.get(zk_paths.PRODUCER_ID_BLOCK_PATH)[0]
    )
    assert end == 6 * 9 * 7 - 1
    assert max(every) <= end
    for ids in got:
        assert ids == sorted(ids)  # each manager's ids increase
