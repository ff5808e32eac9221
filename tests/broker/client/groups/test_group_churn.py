"""Consumer groups under churn, against real ZooKeeper and a real broker (properties 1 and 2 of issue 5).

An invariant checker (tests/support/group_invariants.py) samples, every 10 ms and at one instant, who owns
each partition in ZooKeeper and what every member is actually fetching, while members join, leave, and
have their sessions expired for real.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from tests.broker.client.groups.group_helpers import (
    SESSION_TIMEOUT_MS,
    MemberApp,
    consumed,
    member,
    produce,
    wait_consumed,
    wait_settled,
)
from tests.support.group_invariants import InvariantChecker
from tests.support.zookeeper import expire_session

TOPIC = "churn"
PARTITIONS = 12
GROUP = "churners"
#: Bound on settling once membership is stable: a member's session timeout (the expired member's
#: partitions), the handover (release_timeout_ms is only reached if an application stalls) and slack for
#: a busy machine.
SETTLE_BOUND_S = SESSION_TIMEOUT_MS / 1000 + 7


def test_no_partition_has_two_owners_during_churn_and_all_get_owners(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, PARTITIONS)
    apps: list[MemberApp] = []
    live: list[MemberApp] = []

    def join() -> MemberApp:
        app = MemberApp(member(broker_cluster, GROUP, member_id_prefix=f"m{len(apps)}"), len(apps))
        apps.append(app)
        live.append(app)
        app.start([TOPIC])
        return app

    def members() -> list[Any]:
        return [app.member for app in list(live)]

    produced_rounds = 0
    with InvariantChecker(broker_cluster.zk, GROUP, TOPIC, PARTITIONS, members) as checker:
        for _ in range(3):
            join()
        for step in range(6):
            produce(broker_cluster, TOPIC, PARTITIONS, 20, start=produced_rounds * 20)
            produced_rounds += 1
            if step == 0:
                join()
            elif step == 1:
                leaving = live.pop(0)
                leaving.leave()
            elif step == 2:
                expired = live[0]
                expired_id = expired.member.member_id
                expire_session(expired.member.zookeeper, broker_cluster.zk_connect)
            elif step == 3:
                join()
            elif step == 4:
                leaving = live.pop(1)
                leaving.leave()
            else:
                join()
            time.sleep(0.3)
        # membership is stable from here on
        settle_s = wait_settled(broker_cluster, GROUP, TOPIC, PARTITIONS, members(), SETTLE_BOUND_S)
        produce(broker_cluster, TOPIC, PARTITIONS, 20, start=produced_rounds * 20)
        produced_rounds += 1
        expected = {(p, o) for p in range(PARTITIONS) for o in range(produced_rounds * 20)}
        wait_consumed(apps, expected, 30)
        for app in live:
            app.leave()
        live.clear()

    assert checker.errors == []
    assert checker.violations == []
    assert checker.samples > 50
    assert [e for app in apps for e in app.errors] == []
    assert settle_s < SETTLE_BOUND_S
    assert expired.member_ids[-1] != expired_id  # it joined again, as a new member
    records = consumed(apps)
    assert {(p, o) for p, o, _ in records} == expected  # every produced offset, at least once
    duplicates = {key for key, n in Counter((p, o) for p, o, _ in records).items() if n > 1}
    # only the member whose session expired can cause duplicates: what it consumed after its last commit
    by_expired = {(p, o) for p, o, index in records if index == expired.index}
    assert duplicates <= by_expired


def test_join_and_leave_storms_hand_over_every_record_exactly_once(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, PARTITIONS)
    first = MemberApp(member(broker_cluster, GROUP, member_id_prefix="first"), 0).start([TOPIC])
    apps = [first]
    produce(broker_cluster, TOPIC, PARTITIONS, 30)
    with InvariantChecker(
        broker_cluster.zk, GROUP, TOPIC, PARTITIONS, lambda: [a.member for a in apps]
    ) as checker:
        # a join storm: five members at once
        joiners = [
            MemberApp(member(broker_cluster, GROUP, member_id_prefix=f"storm{i}"), i + 1) for i in range(5)
        ]
        threads = [threading.Thread(target=app.start, args=([TOPIC],)) for app in joiners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        apps.extend(joiners)
        produce(broker_cluster, TOPIC, PARTITIONS, 30, start=30)
        join_settle_s = wait_settled(broker_cluster, GROUP, TOPIC, PARTITIONS, [a.member for a in apps], 15)
        # a leave storm: all but one leave at once
        leavers = apps[:-1]
        for app in leavers:
            app.leave(wait=False)
        for app in leavers:
            app.leave()
        survivor = apps[-1]
        apps_left = [survivor]
        leave_settle_s = wait_settled(broker_cluster, GROUP, TOPIC, PARTITIONS, [survivor.member], 15)
        produce(broker_cluster, TOPIC, PARTITIONS, 30, start=60)
        everything = {(p, o) for p in range(PARTITIONS) for o in range(90)}
        wait_consumed(apps, everything, 30)
        apps = apps_left
        survivor.leave()
        apps = [first, *joiners]

    assert checker.errors == []
    assert checker.violations == []
    assert [e for app in apps for e in app.errors] == []
    assert (join_settle_s, leave_settle_s) < (15, 15)
    records = consumed(apps)
    # clean joins and leaves: every record exactly once (commit on release, claim from the commit)
    assert sorted((p, o) for p, o, _ in records) == sorted(everything)
    assert len(records) == PARTITIONS * 90
