"""The secured dev stack (``lumber dev up --secure``): certificates, a SCRAM user and the clients' settings.

Files, in ``<state_dir>/security/`` (made on the first ``up --secure``, kept by later ones, deleted by
``down --purge``)::

    ca.pem, ca-key.pem          the stack's own CA (:mod:`lumber.dev.dev_certificates`)
    broker.pem, broker-key.pem  the brokers' certificate, for localhost and 127.0.0.1
    <secure_user>.password      the SCRAM user's generated password (one line, mode 0600)

Each broker N listens on ``PLAINTEXT://127.0.0.1:<broker_port + N>`` (the stack's own services and the
default client config) and ``SASL_SSL://127.0.0.1:<broker_sasl_ssl_port + N>`` with SCRAM-SHA-512 and -256;
the user ``[dev] secure_user`` gets both SCRAM credentials in ZooKeeper once ZooKeeper is up (as ``lumber
users add`` would). ``<state_dir>/lumber-secure.toml`` is the stack's config with ``[producer]``,
``[consumer]`` and ``[load]`` on the SASL_SSL listeners (the password by file): ``LUMBER_CONFIG`` pointed at
it, every Lumber tool talks SASL_SSL. :meth:`DevSecurity.client_settings` is what ``dev up`` prints, and
``--json`` includes (the password too: a generated, local secret, printed once by ``up --json``).

Not for production: a real cluster uses its organisation's CA and users (docs/security-clients.md).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from lumber.dev.dev_certificates import CertificateAuthority

#: The mechanisms the secured stack's SASL_SSL listeners offer; clients are told the first.
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


class DevSecurity:
    """The secured stack's files and user in ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path, user: str) -> None:
        self.folder = folder
        self.user = user
        self.ca = CertificateAuthority(folder)
        self.password_file = folder / f"{user}.password"
        self.certfile = folder / "broker.pem"
        self.keyfile = folder / "broker-key.pem"

    @property
    def cafile(self) -> Path:
        return self.ca.cafile

    @property
    def prepared(self) -> bool:
        return self.password_file.exists() and self.certfile.exists()

    def prepare(self) -> None:
        """Make the CA, the brokers' certificate and the user's password, unless they exist."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.certfile.exists():
            self.ca.issue("broker")
        if not self.password_file.exists():
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(secrets.token_urlsafe(24) + "\n")

    def password(self) -> str:
        return self.password_file.read_text(encoding="utf-8").splitlines()[0]

    def broker_settings(self) -> dict[str, Any]:
        """``[broker]`` keys of every broker of the stack (the listeners are each broker's own)."""
        return {
            "ssl_certfile": str(self.certfile),
            "ssl_keyfile": str(self.keyfile),
            "sasl_enabled_mechanisms": list(MECHANISMS),
        }

    @staticmethod
    def listeners(plain_port: int, sasl_ssl_port: int) -> list[str]:
        return [f"PLAINTEXT://127.0.0.1:{plain_port}", f"SASL_SSL://127.0.0.1:{sasl_ssl_port}"]

    def client_keys(self, sasl_ssl_servers: list[str]) -> dict[str, Any]:
        """The security keys of a client section on the SASL_SSL listeners (the password by file)."""
        return {
            "bootstrap_servers": sasl_ssl_servers,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": MECHANISMS[0],
            "sasl_username": self.user,
            "sasl_password_file": str(self.password_file),
            "ssl_cafile": str(self.cafile),
        }

    def client_settings(self, sasl_ssl_servers: list[str], *, with_password: bool) -> dict[str, Any]:
        """What a client needs, Lumber's and the standard clients' names both (``dev up`` prints it)."""
        settings: dict[str, Any] = {
            "listeners": [f"SASL_SSL://{server}" for server in sasl_ssl_servers],
            "bootstrap_servers": sasl_ssl_servers,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": MECHANISMS[0],
            "sasl_username": self.user,
            "sasl_password_file": str(self.password_file),
            "ssl_cafile": str(self.cafile),
        }
        if with_password:
            settings["sasl_password"] = self.password()
        return settings

    def add_user(self, client: KazooClient) -> None:
        """Give the user its SCRAM credentials in ZooKeeper (again: a new salt, the same password)."""
        from broker.cluster.user_credential_store import UserCredentialStore  # noqa: PLC0415
        from broker.network.scram_credential import ScramCredential, ScramMechanism  # noqa: PLC0415

        password = self.password()
        UserCredentialStore(client).upsert(
            self.user, {m: ScramCredential.generate(password, m) for m in ScramMechanism}
        )
