"""``[lag_exporter]``: where the lag exporter (``lumber groups lag --watch --metrics-port N``) listens and how
it is secured (:mod:`pipeline.lag_exporter`, :mod:`broker.web.web_security`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.config_section import ConfigSection, setting

if TYPE_CHECKING:
    from broker.web.web_security import WebSecurity


class LagExporterConfig(ConfigSection):
    """The lag exporter's HTTP server: its address, users and TLS."""

    host: str = setting(
        "127.0.0.1",
        "Address the lag exporter listens on (`--metrics-host` wins). Beyond 127.0.0.1 it needs "
        "users_file, or allow_unauthenticated = true.",
    )
    users_file: str = setting(
        "",
        "A file of name:role:hash lines (`lumber http-users add`): every request needs one of its users "
        "(HTTP Basic; roles read and admin may both scrape). Empty: no authentication.",
    )
    ssl_certfile: str = setting("", "PEM certificate chain: serve HTTPS (empty: plain HTTP).")
    ssl_keyfile: str = setting("", "PEM private key of ssl_certfile (empty: in ssl_certfile).")
    allow_unauthenticated: bool = setting(
        False, "Serve beyond 127.0.0.1 without users_file (refused otherwise)."
    )

    def security(self, host: str | None = None) -> WebSecurity:
        """The server's :class:`WebSecurity`; ``host`` from ``--metrics-host`` if given."""
        # the server's TLS and Basic authentication: imported by the exporter, not by every config read
        from broker.web.web_security import WebSecurity  # noqa: PLC0415

        return WebSecurity(
            "lumber lag exporter",
            "lag_exporter",
            self.host if host is None else host,
            users_file=self.users_file,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
            allow_unauthenticated=self.allow_unauthenticated,
            host_key="" if host is None else "--metrics-host",
        )
