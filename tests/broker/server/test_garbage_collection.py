"""broker/server/garbage_collection.py: what exists at settle() is never walked by a collection again, later
cycles still are; in a subprocess, since it changes the process's collector. And a started broker settles."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support.broker_cluster import BrokerCluster, wait_for

SCRIPT = textwrap.dedent(
    """
    import gc
    import weakref
    from broker.server.garbage_collection import YOUNG_THRESHOLD, GarbageCollection

    before = [[i] for i in range(5000)]  # 5,001 lists the collector tracks
    frozen = GarbageCollection.settle()
    tracked = {id(o) for o in gc.get_objects()}
    print(frozen >= 5001, gc.get_freeze_count() == frozen, gc.get_threshold()[0] == YOUNG_THRESHOLD)
    print(sum(id(o) in tracked for o in before), id(before) in tracked)

    class Cycle:
        pass

    cycle = Cycle()
    cycle.me = cycle  # garbage only a collection frees
    gone = weakref.ref(cycle)
    del cycle
    print(gone() is not None, gc.collect() >= 1, gone() is None)
    """
)


def test_settle_freezes_what_exists_and_later_cycles_are_still_collected() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "True True True"
    assert lines[1] == "0 False"  # none of the 5,001 lists is in any generation a collection walks
    assert lines[2] == "True True True"  # a cycle made later survives until a collection frees it


def test_a_started_broker_has_settled(broker_cluster: BrokerCluster) -> None:
    broker = broker_cluster.broker(0)
    settled = "objects made at start-up out of the garbage collector's walks"
    wait_for(lambda: settled in broker.log(), 30, "the broker's settle() log line")  # right after registering
    (line,) = [line for line in broker.log().splitlines() if settled in line]
    assert int(line.split("froze ")[1].split()[0]) > 10_000  # the broker's modules alone make more
