"""A real broker process with every kind of listener, for the tests of secured clients.

:class:`SecureBroker` starts one broker (``lumber broker start``, through
:class:`~tests.support.broker_cluster.BrokerCluster`) listening on PLAINTEXT (the tests' own probes), SSL,
SASL_PLAINTEXT and SASL_SSL, with a certificate of a CA made for the test
(:class:`~lumber.dev.dev_certificates.CertificateAuthority`), PLAIN and both SCRAM mechanisms enabled, and
user ``alice`` added with the real ``lumber users add`` (its password passed through the environment).
``client_auth`` is the broker's ``ssl_client_auth``: ``required`` for the mutual-TLS tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lumber.dev.dev_certificates import CertificateAuthority, IssuedCertificate
from lumber.dev.process import free_port
from tests.support.broker_cluster import BrokerCluster, BrokerProcess, fixture_broker_settings

#: A password distinctive enough to grep every output for.
PASSWORD = "Alice-S3cret-5f1e9c-never-printed"
USER = "alice"


class SecureBroker:
    """One broker with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners and user ``alice``."""

    def __init__(
        self, cluster: BrokerCluster, folder: Path, *, client_auth: str = "none", **settings: Any
    ) -> None:
        self.folder = folder
        self.ca = CertificateAuthority(folder / "ca")
        server = self.ca.issue("broker")
        self.plain_port, self.ssl_port = free_port(), free_port()
        self.sasl_port, self.sasl_ssl_port = free_port(), free_port()
        tls: dict[str, Any] = {"ssl_certfile": str(server.certfile), "ssl_keyfile": str(server.keyfile)}
        if client_auth != "none":
            tls |= {"ssl_client_auth": client_auth, "ssl_cafile": str(self.ca.cafile)}
        self.broker: BrokerProcess = cluster.add_broker(
            fixture_broker_settings(
                {
                    "listeners": [
                        f"PLAINTEXT://127.0.0.1:{self.plain_port}",
                        f"SSL://127.0.0.1:{self.ssl_port}",
                        f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                        f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}",
                    ],
                    "sasl_enabled_mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                    "sasl_max_failed_authentications": 100_000,
                    **tls,
                    **settings,
                }
            ),
            port=self.plain_port,
        )
        self.cluster = cluster
        self.users("add", USER, "--password-env", "ALICE_PASSWORD", env={"ALICE_PASSWORD": PASSWORD})

    def users(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "lumber", "--config", str(self.broker.config_path), "users", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **(env or {})},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done

    def client_certificate(self, name: str = "client") -> IssuedCertificate:
        return self.ca.issue(name, client=True)

    def sasl_ssl(self, mechanism: str = "SCRAM-SHA-512", password: str = PASSWORD) -> dict[str, Any]:
        """Lumber client settings for the SASL_SSL listener."""
        return {
            "bootstrap_servers": [f"127.0.0.1:{self.sasl_ssl_port}"],
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism,
            "sasl_username": USER,
            "sasl_password": password,
            "ssl_cafile": str(self.ca.cafile),
        }
