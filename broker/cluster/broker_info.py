"""A live broker as registered in ``/brokers/ids/<id>``."""

from __future__ import annotations

from dataclasses import dataclass

from broker.endpoint import Endpoint, SecurityProtocol


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker: its id, its default address (``host``/``port``: its first PLAINTEXT listener,
    else its first) and every advertised listener (empty: one PLAINTEXT listener at host:port)."""

    broker_id: int
    host: str
    port: int
    #: Kafka's ``broker.rack``, from the broker's node (None: it declares none).
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()

    def endpoint(self, listener_name: str) -> Endpoint | None:
        """The advertised endpoint of listener ``listener_name``; None if the broker has no such listener."""
        if not self.endpoints:
            if listener_name == "PLAINTEXT":
                return Endpoint("PLAINTEXT", self.host, self.port, SecurityProtocol.PLAINTEXT)
            return None
        for endpoint in self.endpoints:
            if endpoint.listener_name == listener_name:
                return endpoint
        return None

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"
