"""A group's committed offset of one partition: ``/consumers/<group>/offsets/<topic>/<partition>``.

The node is persistent and holds the next offset the group will consume, with who wrote it and when:
``{"version": 1, "offset": 1234, "member": "<consumer-id>", "timestamp_ms": ...}``. A bare integer (Kafka
0.8's format) is read as well. Writers compare-and-set on the znode version (see
:mod:`broker.client.groups.zookeeper.group_offsets`).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.cluster import zk_paths


@dataclass(frozen=True)
class CommittedOffset:
    """``offset`` is the next offset to consume; ``zk_version`` the znode version it was read at."""

    offset: int
    member: str = ""
    timestamp_ms: int = 0
    zk_version: int = -1

    def encode(self) -> bytes:
        return zk_paths.encode_json(
            {"offset": self.offset, "member": self.member, "timestamp_ms": self.timestamp_ms}
        )

    @classmethod
    def decode(cls, path: str, data: bytes, zk_version: int = -1) -> CommittedOffset:
        text = data.decode("utf-8", errors="replace").strip()
        if text.isdigit():
            return cls(offset=int(text), zk_version=zk_version)
        value = zk_paths.decode_json(path, data)
        offset = value.get("offset")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise zk_paths.ZkDataError(f"{path}: expected an 'offset' >= 0, found {value!r}")
        return cls(
            offset=offset,
            member=str(value.get("member", "")),
            timestamp_ms=int(value.get("timestamp_ms", 0)),
            zk_version=zk_version,
        )
