"""The brokers' and consumer groups' ZooKeeper layout: the one module that names these znodes.

All paths are relative to the chroot of ``[zookeeper] connect``::

    /brokers/ids/<id>                       ephemeral, one per live broker
        {"version": 1, "host": "127.0.0.1", "port": 9092, "timestamp_ms": 1700000000000}
    /brokers/topics/<topic>                 persistent, the topic's partition -> replicas assignment
        {"version": 1, "partitions": {"0": [1], "1": [2], "2": [3]}}
    /cluster/id                             persistent, the cluster's id, created by the first broker
        {"version": 1, "id": "lumber-1f0c..."}
    /consumers/<group>/ids/<consumer-id>    ephemeral, a member and its subscription
    /consumers/<group>/owners/<topic>/<p>   ephemeral, the id of the member that owns partition p
    /consumers/<group>/offsets/<topic>/<p>  persistent, the next offset the group will consume

Lumber keeps one replica per partition (the paper's brokers do not replicate), so a partition's leader is
its first replica while that broker is registered. Data is UTF-8 JSON; readers ignore keys they do not know,
so a later version may add keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = f"{BROKERS_PATH}/ids"
TOPICS_PATH = f"{BROKERS_PATH}/topics"
CONSUMERS_PATH = "/consumers"
CLUSTER_ID_PATH = "/cluster/id"

#: The ``version`` every JSON value written here carries.
DATA_VERSION = 1


class ZkDataError(ValueError):
    """A znode does not hold what its path says it holds (message names the path and the data)."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    if not topic or "/" in topic:
        raise ValueError(f"not a topic name: {topic!r}")
    return f"{TOPICS_PATH}/{topic}"


def group_path(group: str) -> str:
    if not group or "/" in group or group in {".", ".."}:
        raise ValueError(f"not a consumer group name: {group!r}")
    return f"{CONSUMERS_PATH}/{group}"


def group_ids_path(group: str) -> str:
    return f"{group_path(group)}/ids"


def group_member_path(group: str, consumer_id: str) -> str:
    return f"{group_ids_path(group)}/{consumer_id}"


def group_owners_path(group: str, topic: str | None = None) -> str:
    base = f"{group_path(group)}/owners"
    return base if topic is None else f"{base}/{topic}"


def group_owner_path(group: str, topic: str, partition: int) -> str:
    return f"{group_owners_path(group, topic)}/{int(partition)}"


def group_offsets_path(group: str, topic: str | None = None) -> str:
    base = f"{group_path(group)}/offsets"
    return base if topic is None else f"{base}/{topic}"


def group_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{group_offsets_path(group, topic)}/{int(partition)}"


# ------------------------------------------------------------------------------------------- data


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps({"version": DATA_VERSION, **value}, sort_keys=True, separators=(",", ":")).encode()


def _load(path: str, data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{path}: does not hold JSON ({exc}): {data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ZkDataError(f"{path}: expected a JSON object, found {value!r}")
    return value


def encode_broker(host: str, port: int, timestamp_ms: int) -> bytes:
    return _dump({"host": host, "port": int(port), "timestamp_ms": int(timestamp_ms)})


def decode_broker(path: str, data: bytes) -> tuple[str, int]:
    """``(host, port)`` from a ``/brokers/ids/<id>`` node."""
    value = _load(path, data)
    try:
        host, port = value["host"], value["port"]
    except KeyError as exc:
        raise ZkDataError(f"{path}: expected keys 'host' and 'port', found {sorted(value)}") from exc
    if not isinstance(host, str) or not host or not isinstance(port, int) or not 0 < port < 65536:
        raise ZkDataError(f"{path}: host {host!r} / port {port!r} is not an address")
    return host, port


def encode_assignment(assignment: Mapping[int, Sequence[int]]) -> bytes:
    return _dump({"partitions": {str(p): [int(b) for b in assignment[p]] for p in sorted(assignment)}})


def decode_assignment(path: str, data: bytes) -> dict[int, tuple[int, ...]]:
    """Partition -> replicas from a ``/brokers/topics/<topic>`` node; partitions must be 0..n-1."""
    value = _load(path, data)
    try:
        raw = value["partitions"]
        assignment = {int(p): tuple(int(b) for b in replicas) for p, replicas in raw.items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ZkDataError(f"{path}: is not a partition assignment: {value!r}") from exc
    if not assignment or sorted(assignment) != list(range(len(assignment))):
        raise ZkDataError(
            f"{path}: assigns partitions {sorted(assignment)}, expected 0 to {len(assignment) - 1}"
        )
    return assignment


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"id": cluster_id})


def decode_cluster_id(path: str, data: bytes) -> str:
    value = _load(path, data).get("id")
    if not isinstance(value, str) or not value:
        raise ZkDataError(f"{path}: expected a non-empty 'id', found {value!r}")
    return value
