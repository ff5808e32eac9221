"""Who owns a partition in a group: ``/consumers/<group>/owners/<topic>/<partition>`` (ephemeral).

The node holds ``{"version": 1, "owner": "<consumer-id>", "stream": 0, "generation": 7}``: the member,
the stream of that member that consumes the partition, and the generation it was claimed in. The node is
created by the claiming member (a ``create`` either succeeds or finds the node there, so a partition has
at most one owner) and deleted by it, in the same transaction as its last offset commit, when it lets go;
if the member's session ends, ZooKeeper deletes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.cluster import zk_paths


@dataclass(frozen=True)
class PartitionOwner:
    owner: str
    stream: int
    generation: int

    def encode(self) -> bytes:
        return zk_paths.encode_json(
            {"owner": self.owner, "stream": self.stream, "generation": self.generation}
        )

    @classmethod
    def decode(cls, path: str, data: bytes) -> PartitionOwner:
        text = data.decode("utf-8", errors="replace").strip()
        if text and not text.startswith("{"):  # Kafka 0.8 wrote the bare consumer thread id
            return cls(owner=text, stream=0, generation=-1)
        value = zk_paths.decode_json(path, data)
        try:
            return cls(
                owner=str(value["owner"]),
                stream=int(value.get("stream", 0)),
                generation=int(value.get("generation", -1)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise zk_paths.ZkDataError(f"{path}: is not a partition owner: {value!r}") from exc
