"""Shared helpers for the consumer group tests: members with an application thread, producing, settling."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import GroupClosedError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.groups.rebalance_listener import RebalanceListener
from tests.broker.client.helpers import producer
from tests.support.broker_cluster import servers
from tests.support.group_invariants import settled

#: Member sessions in the tests: long enough not to expire on a busy 2-core machine, short enough to wait.
SESSION_TIMEOUT_MS = 3000


def consumer_config(cluster: Any, **settings: Any) -> ConsumerConfig:
    settings.setdefault("auto_offset_reset", "earliest")
    settings.setdefault("fetch_max_wait_ms", 100)
    settings.setdefault("request_timeout_ms", 5000)
    settings.setdefault("retry_backoff_ms", 50)
    return ConsumerConfig(bootstrap_servers=servers(cluster), **settings)


def group_config(**settings: Any) -> GroupConfig:
    settings.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
    settings.setdefault("auto_commit_interval_ms", 200)
    settings.setdefault("release_timeout_ms", 10_000)
    settings.setdefault("retry_backoff_ms", 20)
    settings.setdefault("retry_backoff_max_ms", 500)
    return GroupConfig(**settings)


def member(
    cluster: Any,
    group: str,
    *,
    listener: RebalanceListener | None = None,
    consumer_settings: dict[str, Any] | None = None,
    **settings: Any,
) -> GroupConsumer:
    return GroupConsumer(
        group,
        zookeeper_connect=cluster.zk_connect,
        config=group_config(**settings),
        consumer_config=consumer_config(cluster, **(consumer_settings or {})),
        listener=listener,
    )


def produce(cluster: Any, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    """``per_partition`` records to each partition, values ``b"<p>:<i>"`` with i from ``start``."""
    with producer(cluster) as p:
        for i in range(start, start + per_partition):
            for partition in range(partitions):
                p.send(topic, value=b"%d:%d" % (partition, i), partition=partition)
        p.flush()


@dataclass
class MemberApp:
    """A member polling in its own thread, the way an application does; it closes itself when told to."""

    member: GroupConsumer
    index: int
    records: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, offset, member index)
    errors: list[BaseException] = field(default_factory=list)
    #: the member's ids, in order (a new one after its session expired)
    member_ids: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, topics: list[str]) -> MemberApp:
        self.member.subscribe(topics)
        self._thread = threading.Thread(target=self._run, name=f"app-{self.index}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                member_id = self.member.member_id
                if not self.member_ids or self.member_ids[-1] != member_id:
                    self.member_ids.append(member_id)
                for record in self.member.poll(timeout_ms=50):
                    self.records.append((record.partition, record.offset, self.index))
        except GroupClosedError:
            return
        except Exception as exc:
            self.errors.append(exc)
        finally:
            self.member.close()

    def leave(self, wait: bool = True) -> None:
        """Stop polling and close (commit what was handed out, release, leave), from the app's thread."""
        self._stop.set()
        if wait and self._thread is not None:
            self._thread.join(30)
            assert not self._thread.is_alive(), f"member {self.index} did not close within 30 s"


def wait_settled(
    cluster: Any, group: str, topic: str, partitions: int, members: list[GroupConsumer], timeout_s: float
) -> float:
    """Seconds until the group settled (see :func:`tests.support.group_invariants.settled`)."""
    start = time.monotonic()
    while not settled(cluster.zk, group, topic, partitions, members):
        assert time.monotonic() - start < timeout_s, f"the group did not settle within {timeout_s} s"
        time.sleep(0.02)
    return time.monotonic() - start


def consumed(apps: list[MemberApp]) -> list[tuple[int, int, int]]:
    return [record for app in apps for record in app.records]


def wait_consumed(apps: list[MemberApp], expected: set[tuple[int, int]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        got = {(p, o) for p, o, _ in consumed(apps)}
        if expected <= got:
            return
        assert time.monotonic() < deadline, f"{len(expected - got)} records not consumed within {timeout_s} s"
        time.sleep(0.05)
