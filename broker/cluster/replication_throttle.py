"""Replication throttles: how fast a reassignment may copy (Kafka's ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate`` and the throttled-replicas lists, KIP-73), in ZooKeeper.

Two kinds of node (:mod:`broker.cluster.zk_paths` lists them):

* ``/config/brokers/<id>``, Kafka's node and JSON for a broker's dynamic configs; Lumber reads the two
  rates from it, bytes per second, each a decimal string::

      {"config": {"follower.replication.throttled.rate": "1048576",
                  "leader.replication.throttled.rate": "1048576"}, "version": 1}

* ``/config/throttled_replicas``, **Lumber's own**: the throttled-replicas lists of every topic, in
  Kafka's key names and value format (``partition:broker`` items, or ``*`` for every replica)::

      {"topics": {"events": {"follower.replication.throttled.replicas": "0:3,1:3",
                             "leader.replication.throttled.replicas": "0:1,1:2"}}, "version": 1}

  Kafka keeps these lists in each topic's ``/config/topics/<topic>``; Lumber keeps them apart, so that the
  checks of the topic configs Lumber reads (AlterConfigs replaces a topic's overrides as a whole) stay as
  they are.

What they mean (Kafka's): a leader throttles the copy of partition ``p`` to a follower that is not in the
ISR when ``p:<leader>`` is in the leader list, within its leader rate (all such followers together); a
follower throttles its fetch of ``p`` while it is not in the ISR when ``p:<itself>`` is in the follower list,
within its follower rate. ``lumber cluster reassign --execute --throttle RATE`` writes them (the leaders of
the moving partitions, ORS, in the leader list; the new replicas, AR, in the follower list; the rate on
every broker involved) and removes them once the moves are done.

:class:`ReplicationThrottle` is a broker's view of both nodes, kept by kazoo watches (callbacks only swap
an immutable snapshot; never blocking). :func:`write_throttle` and :func:`clear_throttle` are the tool's
writes (compare-and-set). Thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from broker.cluster import zk_paths
from broker.cluster.errors import ZooKeeperError
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_REPLICAS_PATH = "/config/throttled_replicas"
CONFIG_BROKERS_PATH = "/config/brokers"
#: A partition's replicas on every broker (Kafka's ``*``).
ALL = -1


def broker_config_path(broker_id: int) -> str:
    return f"{CONFIG_BROKERS_PATH}/{int(broker_id)}"


@dataclass(frozen=True)
class ThrottleSnapshot:
    """One broker's rates (None: not throttled) and every topic's throttled ``(partition, broker)`` pairs."""

    leader_rate: int | None = None
    follower_rate: int | None = None
    leader: Mapping[str, frozenset[tuple[int, int]]] = field(default_factory=dict)
    follower: Mapping[str, frozenset[tuple[int, int]]] = field(default_factory=dict)

    @staticmethod
    def _listed(lists: Mapping[str, frozenset[tuple[int, int]]], tp: TopicPartition, broker: int) -> bool:
        pairs = lists.get(tp.topic)
        return pairs is not None and ((ALL, ALL) in pairs or (tp.partition, broker) in pairs)


def parse_replicas(where: str, text: str) -> frozenset[tuple[int, int]]:
    """``"0:1,1:2"`` (or ``"*"``) as ``{(0, 1), (1, 2)}`` (``{(ALL, ALL)}``); ValueError naming ``where``."""
    text = text.strip()
    if text == "*":
        return frozenset({(ALL, ALL)})
    pairs = set()
    for item in filter(None, (i.strip() for i in text.split(","))):
        partition, sep, broker = item.partition(":")
        if not sep or not partition.isdigit() or not broker.isdigit():
            raise ValueError(f"{where}: {item!r} is not PARTITION:BROKER (e.g. 0:101,1:102, or *)")
        pairs.add((int(partition), int(broker)))
    return frozenset(pairs)


def throttled_partitions_of(data: bytes, topic: str) -> set[int] | None:
    """The partitions of ``topic`` in the throttled-replicas node's ``data`` (its two lists); None for all of
    them (``*``). A node that does not decode, or names no such topic, throttles nothing."""
    try:
        lists = zk_paths.decode_json(THROTTLED_REPLICAS_PATH, data)["topics"][topic]
        pairs = {
            pair
            for key in (LEADER_REPLICAS, FOLLOWER_REPLICAS)
            for pair in parse_replicas(topic, lists.get(key, ""))
        }
    except (zk_paths.ZkDataError, KeyError, TypeError, AttributeError, ValueError):
        return set()
    return None if (ALL, ALL) in pairs else {p for p, _b in pairs}


def format_replicas(pairs: Iterable[tuple[int, int]]) -> str:
    return ",".join(f"{p}:{b}" for p, b in sorted(set(pairs)))


class ReplicationThrottle:
    """Broker ``broker_id``'s view of the throttle nodes (see the module docstring)."""

    def __init__(self, client: KazooClient, broker_id: int) -> None:
        self._client = client
        self._broker_id = broker_id
        self.snapshot = ThrottleSnapshot()
        self._watches: list[DataWatch] = []

    def start(self) -> None:
        self._watches = [
            DataWatch(self._client, broker_config_path(self._broker_id), self._on_rates),
            DataWatch(self._client, THROTTLED_REPLICAS_PATH, self._on_replicas),
        ]

    def leader_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, leading ``tp``, throttles its copy to followers out of the ISR."""
        snap = self.snapshot
        return snap.leader_rate is not None and snap._listed(snap.leader, tp, self._broker_id)

    def follower_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, following ``tp`` out of the ISR, throttles its fetch of it."""
        snap = self.snapshot
        return snap.follower_rate is not None and snap._listed(snap.follower, tp, self._broker_id)

    def _on_rates(self, data: bytes | None, _stat: object) -> None:
        path = broker_config_path(self._broker_id)
        rates: dict[str, int | None] = {LEADER_RATE: None, FOLLOWER_RATE: None}
        if data:
            try:
                config = zk_paths.decode_topic_config(path, data)
                for key in rates:
                    if key in config:
                        rates[key] = int(config[key])
            except (zk_paths.ZkDataError, ValueError) as exc:
                logger.error("%s: %s; not throttling", path, exc)  # noqa: TRY400 - bad data, no traceback
        old = self.snapshot
        self.snapshot = ThrottleSnapshot(rates[LEADER_RATE], rates[FOLLOWER_RATE], old.leader, old.follower)
        if (old.leader_rate, old.follower_rate) != (rates[LEADER_RATE], rates[FOLLOWER_RATE]):
            logger.info(
                "broker %d: replication throttle: leader %s B/s, follower %s B/s",
                self._broker_id,
                rates[LEADER_RATE],
                rates[FOLLOWER_RATE],
            )

    def _on_replicas(self, data: bytes | None, _stat: object) -> None:
        leader: dict[str, frozenset[tuple[int, int]]] = {}
        follower: dict[str, frozenset[tuple[int, int]]] = {}
        if data:
            try:
                topics = zk_paths.decode_json(THROTTLED_REPLICAS_PATH, data).get("topics") or {}
                for topic, lists in topics.items():
                    where = f"{THROTTLED_REPLICAS_PATH}: {topic}"
                    leader[topic] = parse_replicas(where, lists.get(LEADER_REPLICAS, ""))
                    follower[topic] = parse_replicas(where, lists.get(FOLLOWER_REPLICAS, ""))
            except (zk_paths.ZkDataError, ValueError, AttributeError) as exc:
                logger.error("%s; not throttling", exc)  # noqa: TRY400 - bad data, no traceback
                leader, follower = {}, {}
        old = self.snapshot
        self.snapshot = ThrottleSnapshot(old.leader_rate, old.follower_rate, leader, follower)


def write_throttle(
    client: KazooClient,
    rate_bytes_per_s: int,
    brokers: Iterable[int],
    leader: Mapping[str, Iterable[tuple[int, int]]],
    follower: Mapping[str, Iterable[tuple[int, int]]],
) -> None:
    """Throttle: both rates on each of ``brokers``, and the topics' lists (merged into what is there)."""
    rate = str(int(rate_bytes_per_s))
    for broker in sorted(set(brokers)):
        _update(
            client,
            broker_config_path(broker),
            "config",
            lambda c: {**c, LEADER_RATE: rate, FOLLOWER_RATE: rate},
        )

    def merge(topics: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for topic in set(leader) | set(follower):
            lists = dict(topics.get(topic, {}))
            for key, new in (
                (LEADER_REPLICAS, leader.get(topic, ())),
                (FOLLOWER_REPLICAS, follower.get(topic, ())),
            ):
                have = parse_replicas(topic, lists.get(key, ""))
                lists[key] = format_replicas(set(have) | set(new))
            topics[topic] = lists
        return topics

    _update(client, THROTTLED_REPLICAS_PATH, "topics", merge)


def clear_throttle(client: KazooClient, brokers: Iterable[int], topics: Iterable[str]) -> None:
    """Remove the rates of ``brokers`` and the lists of ``topics`` (the moves are done)."""
    for broker in sorted(set(brokers)):
        _update(
            client,
            broker_config_path(broker),
            "config",
            lambda c: {k: v for k, v in c.items() if k not in (LEADER_RATE, FOLLOWER_RATE)},
        )
    gone = set(topics)
    _update(
        client, THROTTLED_REPLICAS_PATH, "topics", lambda t: {k: v for k, v in t.items() if k not in gone}
    )


def _update(client: KazooClient, path: str, key: str, change: Callable[[dict[str, Any]], Any]) -> None:
    """Compare-and-set ``path``'s JSON ``key`` through ``change`` (created if absent)."""
    for _ in range(10):
        try:
            data, stat = client.get(path)
            value = zk_paths.decode_json(path, data).get(key) or {}
            version = stat.version
        except NoNodeError:
            value, version = {}, -1
        new = change(dict(value))
        encoded = zk_paths.encode_json({key: new})
        try:
            if version < 0:
                client.create(path, encoded, makepath=True)
            else:
                client.set(path, encoded, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        return
    raise ZooKeeperError(f"zookeeper: {path} kept changing; try again", path=path, retriable=True)
