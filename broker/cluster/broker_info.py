"""A live broker as registered in ``/brokers/ids/<id>``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker: its id and the address clients reach it at."""

    broker_id: int
    host: str
    port: int
    #: Kafka's ``broker.rack``, from the broker's node (None: it declares none).
    rack: str | None = None

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"
