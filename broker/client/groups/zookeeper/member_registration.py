"""A group member's registration, ``/consumers/<group>/ids/<consumer-id>`` (ephemeral): its subscription.

The node holds ``{"version": 1, "subscription": {"events": 2}, "host": "web-1", "pid": 4242,
"timestamp_ms": ...}`` (topic -> number of streams). It is written once, when the member joins; a member
that changes its subscription would join again under a new id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.cluster import zk_paths


@dataclass(frozen=True)
class MemberRegistration:
    """What a member tells the group about itself."""

    consumer_id: str
    subscription: dict[str, int]
    host: str = ""
    pid: int = 0
    timestamp_ms: int = field(default=0, compare=False)

    def encode(self) -> bytes:
        return zk_paths.encode_json(
            {
                "subscription": dict(sorted(self.subscription.items())),
                "pattern": "static",
                "host": self.host,
                "pid": self.pid,
                "timestamp_ms": self.timestamp_ms,
            }
        )

    @classmethod
    def decode(cls, consumer_id: str, path: str, data: bytes) -> MemberRegistration:
        value = zk_paths.decode_json(path, data)
        try:
            subscription = {str(t): int(n) for t, n in value["subscription"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise zk_paths.ZkDataError(f"{path}: is not a member registration: {value!r}") from exc
        if any(n < 1 for n in subscription.values()):
            raise zk_paths.ZkDataError(f"{path}: a topic with fewer than 1 stream: {subscription!r}")
        return cls(
            consumer_id=consumer_id,
            subscription=subscription,
            host=str(value.get("host", "")),
            pid=int(value.get("pid", 0)),
            timestamp_ms=int(value.get("timestamp_ms", 0)),
        )
