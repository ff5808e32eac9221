"""Unmodified third-party consumer groups against real brokers: confluent-kafka, kafka-python and aiokafka
consumers in separate processes (:mod:`tests.support.group_worker`) share one ``group.id`` over a
12-partition topic while records are produced; members join, leave cleanly and are kill -9'd; the
coordinator's broker is kill -9'd;
confluent-kafka's AdminClient lists, describes and deletes groups and lists and alters their offsets.

What every run must show (:func:`check_run`):

* every produced record consumed;
* a partition's new owner starts exactly where the committed offsets say (at or after the last commit seen
  before its assignment, never past a record not yet consumed): so the only records consumed twice are those
  after the last commit, consumed by a member that was killed before committing them. A start refused says
  whose commit it ignored and, from the starting member's own log, what its client was told: librdkafka's
  committed-offset answer ("... back to pending list with offset INVALID": the coordinator answered "none")
  or an offset reset (a Fetch answered OFFSET_OUT_OF_RANGE), kafka-python's committed offset or reset.
  One start below the commit is the client's, not the coordinator's: librdkafka can deliver, right after a
  rebalance, a record it fetched under the member's earlier assignment of the partition (its issue 1359;
  seen here: the member's log says it started at the commit, 106, and its first record was offset 0,
  fetched 4 s before). Such a start passes only when librdkafka's own log says it started the partition at
  the last commit (:func:`_rdkafka_started_at`); the stale records count as duplicates;
* no two members own a partition at the same time: each member's ownership runs from its assign callback to
  its revoke callback, its clean close or its kill -9. This is stricter than "no overlap within a
  generation" (eager rebalancing revokes everything before a member rejoins); kafka-python's members also
  log their generation, and two assignments of one generation must not share a partition. One overlap is
  Kafka's classic protocol itself: a member whose heartbeats stalled past its session timeout (a loaded
  machine) is removed and its partitions reassigned before it learns so, and it keeps its assignment until
  its next heartbeat or commit is refused. Such a zombie is fenced, not trusted: an overlap passes only if
  the earlier owner committed nothing of the partition after the next owner's assignment began.

kafka-python 3.0.12 drops a rebalance it completed while its ``poll()`` was not waiting for it: the
JoinGroup-SyncGroup task runs on its IO thread, ``poll(timeout_ms=100)`` gives up on it when its timer ends,
and the next ``poll`` finds the task done and starts a new one (``BaseCoordinator.join_group_async`` tests
``is_done``, not its result), so the assignment is never applied and the member sends JoinGroup again at
once. A leader's JoinGroup in Stable rebalances the group, on Kafka 4.4 as on Lumber, so a loaded machine
shows extra generations ("member ... rejoined" right after a generation completed); the waits allow for
them. A wait that times out fails with each live member's last assignment, its coordinator's last join
and sync lines (the kafka-python worker logs them) and the broker's account of the group.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.server.group.offsets_topic_records import OFFSETS_TOPIC, partition_for
from tests.support.broker_cluster import BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[4]
PARTITIONS = 12
GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 1000}
#: The lines of a kafka-python worker's coordinator log a timed-out wait shows (GroupRun.diagnosis).
_COORDINATOR_WORDS = ("JoinGroup", "SyncGroup", "joining", "Enabling heartbeat", "timed out", "dead", "fail")


@dataclass
class Worker:
    kind: str
    events_path: Path
    popen: subprocess.Popen[bytes]
    #: When the test ended it: kill -9 (its ownership ends then) or SIGTERM.
    ended: float | None = None

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        lines = self.events_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]


@dataclass
class GroupRun:
    """Consumers of one group and the records produced for them."""

    cluster: BrokerCluster
    base: Path
    group: str
    topic: str
    workers: list[Worker] = field(default_factory=list)
    produced: dict[str, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    _producer: Any = None

    def start(self, kind: str) -> Worker:
        path = self.base / f"{self.group}-{len(self.workers)}-{kind}.jsonl"
        log = (self.base / f"{path.stem}.log").open("wb")
        popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.group_worker",
                kind,
                self.cluster.bootstrap_servers,
                self.group,
                self.topic,
                str(path),
            ],
            cwd=REPO,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        worker = Worker(kind, path, popen)
        self.workers.append(worker)
        return worker

    def live(self) -> list[Worker]:
        """The workers the test has not ended; one that died on its own fails the test with its output."""
        for worker in self.workers:
            if worker.ended is None and worker.popen.poll() is not None:
                output = (self.base / f"{worker.events_path.stem}.log").read_text(errors="replace")
                pytest.fail(
                    f"{worker.kind} worker {worker.events_path.name} exited on its own:\n{output[-3000:]}"
                )
        return [w for w in self.workers if w.ended is None]

    def stop(self, worker: Worker) -> None:
        worker.popen.send_signal(signal.SIGTERM)
        worker.popen.wait(30)
        worker.ended = time.time()
        assert any(e["e"] == "closed" for e in worker.events()), f"{worker.events_path} did not close cleanly"

    def kill(self, worker: Worker) -> None:
        worker.ended = time.time()
        worker.popen.kill()
        worker.popen.wait(10)

    def produce(self, count: int) -> None:
        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self.cluster.bootstrap_servers, "acks": "all"})
        start = len(self.produced)

        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err
            self.produced[msg.value().decode()] = (msg.partition(), msg.offset())

        for i in range(start, start + count):
            self._producer.produce(
                self.topic, value=f"v{i:06d}".encode(), partition=i % PARTITIONS, on_delivery=delivered
            )
        assert self._producer.flush(30) == 0
        assert len(self.produced) == start + count

    def consumed(self) -> set[str]:
        return {e["v"] for w in self.workers for e in w.events() if e["e"] == "rec"}

    def wait_consumed(self, timeout_s: float = 60) -> None:
        wait_for(lambda: set(self.produced) <= self.consumed(), timeout_s, "every produced record consumed")

    def wait_assigned(self, members: int, timeout_s: float = 120) -> None:
        """Until the live members' latest assignments cover the partitions, each with its own share. The
        bound is a hang guard, not a latency check: on a loaded CI machine (three test workers on two cores,
        JVMs beside) a kafka-python member once took over 60 s to join a rebalance."""

        def assigned() -> bool:
            owned: list[int] = []
            for worker in self.live():
                latest = None
                for event in worker.events():
                    if event["e"] == "assign":
                        latest = event["parts"]
                    elif event["e"] == "revoke":
                        latest = None
                if latest is None:
                    return False
                owned += latest
            return sorted(owned) == list(range(PARTITIONS)) and len(self.live()) == members

        deadline = time.monotonic() + timeout_s
        while not assigned():
            if time.monotonic() > deadline:
                pytest.fail(
                    f"timed out after {timeout_s} s waiting for {members} members sharing the {PARTITIONS} "
                    f"partitions\n{self.diagnosis()}",
                    pytrace=False,
                )
            time.sleep(0.05)

    def diagnosis(self) -> str:
        """Where each live member stands, for a wait that timed out: its last assign or revoke event and,
        for kafka-python, the last join, sync and heartbeat lines of its coordinator's log; then the
        coordinator's own account of the group (its broker logs)."""
        lines = []
        for worker in self.live():
            latest = [e for e in worker.events() if e["e"] in ("assign", "revoke")][-1:]
            lines.append(f"{worker.events_path.name}: last {latest[0] if latest else 'no assignment'}")
            log = self.base / f"{worker.events_path.stem}.log"
            if worker.kind == "kafka-python" and log.exists():
                text = log.read_text(errors="replace").splitlines()
                said = [line[:300] for line in text if any(word in line for word in _COORDINATOR_WORDS)]
                beats = [line[:300] for line in text if "Sending HeartbeatRequest" in line]
                lines += [f"  {line}" for line in said[-12:] + beats[-1:]]
        for broker in self.cluster.brokers:
            if broker.log_path.exists():
                marker = f"group {self.group}:"
                text = broker.log_path.read_text(errors="replace").splitlines()
                told = [line for line in text if marker in line]
                lines += [f"broker {broker.broker_id}: {line}" for line in told[-15:]]
        return "\n".join(lines)

    def close(self) -> None:
        for worker in self.live():
            self.stop(worker)


def check_run(run: GroupRun) -> dict[str, int]:
    """The checks of the module docstring; returns counts (records, duplicates, assignments)."""
    consumed: dict[str, int] = defaultdict(int)
    intervals: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    by_generation: dict[int, dict[int, int]] = defaultdict(dict)
    starts: list[tuple[float, int, int, dict[str, Any]]] = []  # (assign time, partition, worker, first rec)
    commits: dict[int, list[tuple[float, int, int]]] = defaultdict(list)  # p -> (time, offset, worker)
    commit_times: dict[tuple[int, int], list[float]] = defaultdict(list)  # (worker, partition) -> times
    records: dict[int, list[tuple[float, int]]] = defaultdict(list)
    assignments = 0
    for index, worker in enumerate(run.workers):
        events = worker.events()
        end = worker.ended if worker.ended is not None else time.time()
        owned: dict[int, float] = {}
        for event in events:
            kind = event["e"]
            if kind == "assign":
                assignments += 1
                for p in event["parts"]:
                    owned[p] = event["t"]
                    rec = _first_record(events, event, p)
                    if rec is not None:
                        starts.append((event["t"], p, index, rec))
                    if event["gen"] >= 0:
                        other = by_generation[event["gen"]].get(p)
                        assert other is None or other == index, (
                            f"generation {event['gen']}: partition {p} assigned to workers {other} and "
                            f"{index}"
                        )
                        by_generation[event["gen"]][p] = index
            elif kind == "revoke":
                for p in event["parts"]:
                    if p in owned:
                        intervals[p].append((owned.pop(p), event["t"], index))
            elif kind == "rec":
                consumed[event["v"]] += 1
                records[event["p"]].append((event["t"], event["o"]))
                assert event["p"] in owned, f"worker {index} consumed {event} outside its assignment"
            elif kind == "commit":
                commits[event["p"]].append((event["t"], event["o"], index))
                commit_times[index, event["p"]].append(event["t"])
        for p, since in owned.items():
            intervals[p].append((since, end, index))

    missing = sorted(set(run.produced) - set(consumed))
    assert not missing, f"{len(missing)} produced records never consumed, e.g. {missing[:5]}"
    for p, spans in intervals.items():
        spans.sort()
        for (_s1, e1, w1), (s2, _e2, w2) in itertools.pairwise(spans):
            late = [t for t in commit_times[w1, p] if s2 < t <= e1]
            assert e1 <= s2 or not late, (
                f"partition {p}: worker {w1} owned it until {e1:.3f}, worker {w2} from {s2:.3f}, and worker "
                f"{w1} committed it at {late[0]:.3f}: a removed member's commit was accepted"
            )
    for assigned_at, p, index, rec in starts:
        first = int(rec["o"])
        before = [(o, w, t) for t, o, w in commits[p] if t <= assigned_at]
        committed = max((o for o, _w, _t in before), default=0)
        seen = max((o + 1 for t, o in records[p] if t <= assigned_at), default=0)
        if first < committed and _rdkafka_started_at(run, index, p, assigned_at) == committed:
            continue  # librdkafka started at the commit, and delivered a record it fetched before (its #1359)
        if not committed <= first <= max(seen, committed):
            by = "none" if not before else "{} (worker {} at {:.3f})".format(*max(before))
            pytest.fail(
                f"worker {index} started partition {p} at offset {first} (assigned at {assigned_at:.3f}): "
                f"the last commit before was {by}, the records consumed before reached {seen}; that first "
                f"record: {rec['v']} at {rec['t']:.3f}, produced at (partition, offset) "
                f"{run.produced.get(rec['v'])}\n"
                f"{_start_account(run, index, p)}",
                pytrace=False,
            )
    duplicates = sum(n - 1 for n in consumed.values())
    return {"records": len(run.produced), "duplicates": duplicates, "assignments": assignments}


def _rdkafka_started_at(run: GroupRun, index: int, p: int, assigned_at: float) -> int | None:
    """Where librdkafka (a confluent-kafka worker's ``cgrp`` debug log) started fetching ``p`` for the
    assignment of ``assigned_at``: its first "Starting pending assigned partition <topic> [p] at offset N"
    logged from then on; None if it logged none (kafka-python) or started at INVALID (no commit).

    A record below that offset delivered under the assignment was fetched under an earlier assignment of
    the same worker and delivered after the rebalance (librdkafka's issue 1359, "Consuming message from
    unassigned partition after rebalance"): the coordinator answered the commit, the client started from
    it, and the stale record is a duplicate the client made, counted in ``duplicates``."""
    log = run.base / f"{run.workers[index].events_path.stem}.log"
    if not log.exists():
        return None
    pattern = re.compile(
        rf"^%7\|([0-9.]+)\|SRVPEND\|.*Starting pending assigned partition \S+ \[{p}\] at offset (\w+)"
    )
    for line in log.read_text(errors="replace").splitlines():
        match = pattern.match(line)
        if match and float(match[1]) >= assigned_at - 0.5:
            return int(match[2]) if match[2].isdigit() else None  # INVALID: auto.offset.reset's start
    return None


def _start_account(run: GroupRun, index: int, p: int) -> str:
    """How worker ``index`` came to start partition ``p`` where it did, from its own log: librdkafka's
    committed-offset fetches and starts (its ``cgrp`` debug: "... [p] back to pending list with offset
    INVALID" is the coordinator answering "no offset") and its offset resets (a Fetch answered
    OFFSET_OUT_OF_RANGE is a warning); kafka-python's committed-offset fetches and resets; then each
    broker's loads and unloads of ``__consumer_offsets`` partitions (a group reloaded from its log while a
    commit was under way) and the coordinator's account of the group."""
    worker = run.workers[index]
    log = run.base / f"{worker.events_path.stem}.log"
    text = log.read_text(errors="replace").splitlines() if log.exists() else []
    marks = (f"[{p}]", f"partition={p})")
    words = ("OFFSETFETCH", "SRVPEND", "OFFSET", "reset", "Reset", "committed", "out of range", "Failed")
    told = [line[:300] for line in text if any(m in line for m in marks) and any(w in line for w in words)]
    lines = [f"{log.name}, partition {p}:"] + [f"  {line}" for line in told[-25:]]
    for broker in run.cluster.brokers:
        if broker.log_path.exists():
            text = broker.log_path.read_text(errors="replace").splitlines()
            loads = [line for line in text if OFFSETS_TOPIC in line and "loaded" in line]
            lines += [f"broker {broker.broker_id}: {line[:300]}" for line in loads[-10:]]
    return "\n".join([*lines, run.diagnosis()])


def _first_record(events: list[dict[str, Any]], assign: dict[str, Any], p: int) -> dict[str, Any] | None:
    """The first record event of ``p`` consumed under ``assign`` (before ``p`` is revoked)."""
    for event in events[events.index(assign) + 1 :]:
        if event["e"] == "revoke" and p in event["parts"]:
            return None
        if event["e"] == "rec" and event["p"] == p:
            return event
    return None


@pytest.fixture
def group_run(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> Iterator[Callable[..., GroupRun]]:
    runs: list[GroupRun] = []

    def make(group: str, brokers: int = 1, replication_factor: int = 1, **settings: Any) -> GroupRun:
        cluster = start_cluster(brokers, **GROUP_SETTINGS, **settings)
        cluster.create_topic("events", PARTITIONS, replication_factor=replication_factor)
        run = GroupRun(cluster, tmp_path, group, "events")
        runs.append(run)
        return run

    yield make
    for run in runs:
        for worker in run.live():
            worker.popen.kill()
            worker.popen.wait(10)


def test_confluent_kafka_group_join_leave_kill(group_run: Callable[..., GroupRun]) -> None:
    run = group_run("confluent")
    for _ in range(3):
        run.start("confluent")
    run.produce(600)
    run.wait_assigned(3)
    run.wait_consumed()
    run.start("confluent")  # a member joins
    run.produce(300)
    run.wait_assigned(4)
    run.wait_consumed()
    run.stop(run.live()[0])  # one leaves cleanly
    run.produce(300)
    run.wait_assigned(3)
    run.wait_consumed()
    run.kill(run.live()[0])  # one is kill -9'd mid-stream
    run.produce(300)
    run.wait_assigned(2)
    run.wait_consumed()
    run.close()
    counts = check_run(run)
    assert counts["records"] == 1500


@pytest.mark.slow
def test_confluent_kafka_group_random_rounds(group_run: Callable[..., GroupRun]) -> None:
    """Bounded rounds of joins, clean leaves and kill -9s, each round with records produced throughout."""
    run = group_run("rounds")
    for _ in range(3):
        run.start("confluent")
    run.wait_assigned(3)
    steps = ["join", "kill", "leave", "join", "join", "kill", "leave", "kill", "join"]
    stop = threading.Event()

    def produce_forever() -> None:
        while not stop.is_set():
            run.produce(24)
            time.sleep(0.05)

    producer = threading.Thread(target=produce_forever, daemon=True)
    producer.start()
    try:
        for step in steps:
            if step == "join":
                run.start("confluent")
            elif step == "leave":
                run.stop(run.live()[0])
            else:
                run.kill(run.live()[-1])
            run.wait_assigned(len(run.live()))
    finally:
        stop.set()
        producer.join(60)
    run.wait_consumed()
    run.close()
    counts = check_run(run)
    assert counts["records"] == len(run.produced)


def test_kafka_python_group_and_a_mixed_group(group_run: Callable[..., GroupRun]) -> None:
    run = group_run("kafka-python")
    for _ in range(2):
        run.start("kafka-python")
    run.produce(240)
    run.wait_assigned(2)
    run.wait_consumed()
    run.start("kafka-python")
    run.produce(240)
    run.wait_assigned(3)
    run.wait_consumed()
    run.kill(run.live()[0])
    run.produce(240)
    run.wait_assigned(2)
    run.wait_consumed()
    run.close()
    assert check_run(run)["records"] == 720

    # one group of both clients: the leader (either) assigns with the protocol both support, range
    mixed = GroupRun(run.cluster, run.base, "mixed", "events")
    mixed.produced = dict(run.produced)  # a new group reads the topic from the start
    try:
        mixed.start("confluent")
        mixed.start("kafka-python")
        mixed.wait_assigned(2)
        mixed.start("kafka-python")
        mixed.start("confluent")
        mixed.wait_assigned(4)
        mixed.wait_consumed()
        mixed.stop(mixed.live()[1])
        mixed.kill(mixed.live()[-1])
        mixed.wait_assigned(2)
        mixed.produce(240)
        mixed.wait_consumed()
        mixed.close()
    finally:
        for worker in mixed.live():
            worker.popen.kill()
    assert check_run(mixed)["records"] == 960


def test_aiokafka_group(group_run: Callable[..., GroupRun]) -> None:
    run = group_run("aiokafka")
    for _ in range(2):
        run.start("aiokafka")
    run.produce(240)
    run.wait_assigned(2)
    run.wait_consumed()
    run.start("aiokafka")
    run.produce(240)
    run.wait_assigned(3)
    run.wait_consumed()
    run.kill(run.live()[0])
    run.produce(240)
    run.wait_assigned(2)
    run.wait_consumed()
    run.close()
    assert check_run(run)["records"] == 720


def test_coordinator_killed_group_carries_on_from_committed_offsets(
    group_run: Callable[..., GroupRun],
) -> None:
    # a follower that stops fetching leaves the ISR after 3 s (as in test_replication): after a kill -9 a
    # surviving follower's fetch can go unanswered for its 30 s socket timeout (seen on main too)
    run = group_run(
        "failover",
        brokers=3,
        replication_factor=3,
        replica_lag_time_max_ms=3000,
        replica_fetch_wait_max_ms=200,
        replica_fetch_backoff_ms=200,
    )
    for _ in range(3):
        run.start("confluent")
    run.produce(600)
    run.wait_assigned(3)
    run.wait_consumed()
    number = partition_for(run.group, 4)
    assert len(run.cluster.state_of(OFFSETS_TOPIC, number).isr) == 3  # RF 3
    coordinator = run.cluster.leader_of(OFFSETS_TOPIC, number)
    committed_before = _logged_commits(run)
    coordinator.kill()  # kill -9 of the coordinator's broker
    run.cluster.wait_for_leader(OFFSETS_TOPIC, number, lambda s: s.leader not in (-1, coordinator.broker_id))
    run.produce(600)
    run.wait_consumed(90)
    admin = AdminClient({"bootstrap.servers": run.cluster.bootstrap_servers})
    offsets = _committed(admin, run.group)
    for p, offset in committed_before.items():
        assert offsets[p] >= offset, f"partition {p}: committed {offset} before the kill, {offsets[p]} after"
    run.close()
    counts = check_run(run)
    assert counts["records"] == 1200


def _logged_commits(run: GroupRun) -> dict[int, int]:
    last: dict[int, int] = {}
    for worker in run.workers:
        for event in worker.events():
            if event["e"] == "commit":
                last[event["p"]] = max(last.get(event["p"], 0), event["o"])
    return last


def _committed(admin: AdminClient, group: str) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [ConfluentPartition("events", p) for p in range(PARTITIONS)]
    )
    result = admin.list_consumer_group_offsets([request], request_timeout=30)[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_admin_client_lists_describes_alters_and_deletes_groups(group_run: Callable[..., GroupRun]) -> None:
    run = group_run("admin")
    run.start("confluent")
    run.produce(48)
    run.wait_assigned(1)
    run.wait_consumed()
    admin = AdminClient({"bootstrap.servers": run.cluster.bootstrap_servers})

    listed = admin.list_consumer_groups(request_timeout=30).result(30)
    assert [(g.group_id, g.is_simple_consumer_group, str(g.state)) for g in listed.valid] == [
        ("admin", False, "ConsumerGroupState.STABLE")
    ]
    described = admin.describe_consumer_groups(["admin"], request_timeout=30)["admin"].result(30)
    assert (str(described.state), described.partition_assignor, len(described.members)) == (
        "ConsumerGroupState.STABLE",
        "range",
        1,
    )
    member = described.members[0]
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == list(range(PARTITIONS))
    assert all(tp.topic == "events" for tp in member.assignment.topic_partitions)
    wait_for(
        lambda: _committed(admin, "admin") == dict.fromkeys(range(PARTITIONS), 4), 30, "offsets 4 everywhere"
    )

    deleted = admin.delete_consumer_groups(["admin"], request_timeout=30)["admin"]
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        deleted.result(30)
    run.close()
    wait_for(
        lambda: (
            str(admin.describe_consumer_groups(["admin"])["admin"].result(30).state)
            == "ConsumerGroupState.EMPTY"
        ),
        30,
        "the group to be empty",
    )
    altered = ConsumerGroupTopicPartitions("admin", [ConfluentPartition("events", 3, 1)])
    result = admin.alter_consumer_group_offsets([altered], request_timeout=30)["admin"].result(30)
    assert [(tp.partition, tp.offset, tp.error) for tp in result.topic_partitions] == [(3, 1, None)]
    assert _committed(admin, "admin")[3] == 1
    admin.delete_consumer_groups(["admin"], request_timeout=30)["admin"].result(30)
    assert admin.list_consumer_groups(request_timeout=30).result(30).valid == []
    assert _committed(admin, "admin") == dict.fromkeys(range(PARTITIONS), -1001)
