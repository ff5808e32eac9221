"""``lumber topics alter TOPIC --partitions N | --replication-factor N`` (see :mod:`lumber.cli.topics`).

``--partitions`` adds partitions (Kafka's ``kafka-topics.sh --alter --partitions``, through
:meth:`broker.cluster.topic_admin.TopicAdmin.add_partitions`); it first prints Kafka's warning that keyed
records then go to other partitions, since a key's partition is its hash modulo the partition count.
``--replication-factor`` (which Kafka's tool leaves to a reassignment plan) proposes the plan
(:func:`broker.cluster.reassignment_plan.replication_factor_plan`), prints it, asks the controller for it
and waits (``--timeout``) until every partition has its new replicas.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.cluster.topic_admin import TopicAdmin
    from lumber.config import LumberConfig

#: Kafka's words (TopicCommand), printed before partitions are added.
KEYS_MOVE_WARNING = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of "
    "the messages will be affected"
)


def alter(args: argparse.Namespace, admin: TopicAdmin, _config: LumberConfig) -> int:
    from lumber.cli.cluster import ClusterSnapshot, execute, wait_for_moves
    from lumber.cli.topic_request_error import TopicRequestError

    topic = args.topic
    if args.partitions is not None:
        current = len(admin.describe_topic(topic))
        if args.partitions <= current:
            raise TopicRequestError(
                f"--partitions {args.partitions}: topic {topic!r} has {current} partitions; the count "
                "can only grow"
            )
        print(KEYS_MOVE_WARNING, file=sys.stderr)
        added = admin.add_partitions(topic, args.partitions)
        for partition, replicas in sorted(added.items()):
            print(f"{topic}-{partition}: created on {list(replicas)}")
        print(f"topic {topic!r} has {args.partitions} partitions now")
        return 0
    from broker.cluster.reassignment_plan import replication_factor_plan

    snapshot = ClusterSnapshot.read(admin.client)
    assignment = admin.describe_topic(topic)
    load = Counter(dict.fromkeys(snapshot.live, 0))
    for partitions in snapshot.assignments.values():
        for replicas in partitions.values():
            load.update(b for b in replicas if b in load)
    plan = replication_factor_plan(topic, assignment, args.replication_factor, load, snapshot.racks)
    if not plan.targets:
        print(f"topic {topic!r} has replication factor {args.replication_factor} already")
        return 0
    plan.check("--replication-factor", snapshot.assignments, snapshot.live, list(snapshot.moving))
    for tp, replicas in sorted(plan.targets.items()):
        print(f"{tp}: {list(assignment[tp.partition])} -> {list(replicas)}")
    execute(args, admin.client, snapshot, plan)
    code = wait_for_moves(args, admin.client, plan)
    if code == 0:
        print(f"topic {topic!r} has replication factor {args.replication_factor} now")
    return code
