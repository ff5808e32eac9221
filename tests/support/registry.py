"""A real schema registry process for tests: ``lumber schemas serve`` on a free 127.0.0.1 port.

Used by the registry's own tests (``tests/schemas/conftest.py``) and by every test that needs a registry
(the load job's). Start with :func:`launch_registry`, stop with :meth:`RegistryProcess.stop` (by pid).
:func:`launch_secure_registry` starts one over HTTPS (a CA made in the test) whose every request must
authenticate (HTTP Basic: an ``admin`` and a ``readonly`` user, their passwords in files of mode 0600).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import ProcessHandle, free_port, start_and_wait, stop
from schemas.client import SchemaRegistryClient

ADMIN_PASSWORD = "Adm1n-Reg-5d2e8a-never-printed"
READER_PASSWORD = "R3ader-Reg-7c4f1b-never-printed"


@dataclass
class RegistryProcess:
    url: str
    port: int
    zk_connect: str
    handle: ProcessHandle
    popen: subprocess.Popen[bytes]
    log_path: Path
    config_path: Path

    def stop(self) -> None:
        stop(self.handle, popen=self.popen)
        # reap it: stop() can see the zombie before Popen does, which leaves Popen.returncode unset
        self.popen.wait(timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def launch_registry(
    zk_connect: str, base_dir: Path, name: str = "registry", extra_toml: str = ""
) -> RegistryProcess:
    port = free_port()
    base_dir.mkdir(parents=True, exist_ok=True)
    config_path = base_dir / f"{name}.toml"
    config_path.write_text(
        f'[zookeeper]\nconnect = "{zk_connect}"\n\n[registry]\nport = {port}\nurl = "http://127.0.0.1:{port}"\n'
        + extra_toml
    )
    url = f"http://127.0.0.1:{port}"
    log_path = base_dir / f"{name}.log"
    argv = [sys.executable, "-m", "lumber", "--config", str(config_path), "schemas", "serve"]
    handle, popen = start_and_wait(name, argv, log_path, lambda: _answers(url), timeout_s=60)
    return RegistryProcess(url, port, zk_connect, handle, popen, log_path, config_path)


@dataclass
class SecureRegistry:
    """A :class:`RegistryProcess` over HTTPS with Basic users ``admin`` and ``reader`` (readonly)."""

    process: RegistryProcess
    cafile: Path
    #: user -> a file (mode 0600) whose first line is the user's password
    password_files: dict[str, Path]

    @property
    def url(self) -> str:
        return self.process.url

    def client_toml(self, user: str = "reader", password_file: Path | None = None) -> str:
        """The ``[registry]`` keys of a client: the URL, ``user`` with its password file (or
        ``password_file``), the CA file."""
        path = password_file or self.password_files[user]
        return (
            f'url = "{self.url}"\nbasic_auth_username = "{user}"\n'
            f'basic_auth_password_file = "{path}"\nssl_cafile = "{self.cafile}"\n'
        )

    def admin(self) -> SchemaRegistryClient:
        """A client of the ``admin`` user (to register schemas, as an operator does)."""
        return SchemaRegistryClient(self.url, basic_auth=("admin", ADMIN_PASSWORD), cafile=str(self.cafile))

    def stop(self) -> None:
        self.process.stop()


def launch_secure_registry(zk_connect: str, base_dir: Path, name: str = "registry") -> SecureRegistry:
    """``lumber schemas serve`` over HTTPS with ``auth_users_file`` (see the module docstring)."""
    base_dir.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority(base_dir / "ca")
    server = ca.issue(name)
    users = base_dir / f"{name}-users"
    users.write_text(f"admin: {ADMIN_PASSWORD},admin\nreader: {READER_PASSWORD},readonly\n")
    users.chmod(0o600)
    password_files = {}
    for user, password in (("admin", ADMIN_PASSWORD), ("reader", READER_PASSWORD)):
        path = password_files[user] = base_dir / f"{user}.password"
        path.write_text(password + "\n")
        path.chmod(0o600)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    config_path = base_dir / f"{name}.toml"
    config_path.write_text(
        f'[zookeeper]\nconnect = "{zk_connect}"\n\n[registry]\nport = {port}\nurl = "{url}"\n'
        f'ssl_certfile = "{server.certfile}"\nssl_keyfile = "{server.keyfile}"\nauth_users_file = "{users}"\n'
    )
    log_path = base_dir / f"{name}.log"

    def ready() -> bool:  # up and asking for credentials
        try:
            return (
                httpx.get(
                    url, verify=ssl.create_default_context(cafile=str(ca.cafile)), timeout=1.0
                ).status_code
                == 401
            )
        except httpx.HTTPError:
            return False

    argv = [sys.executable, "-m", "lumber", "--config", str(config_path), "schemas", "serve"]
    handle, popen = start_and_wait(name, argv, log_path, ready, timeout_s=60)
    process = RegistryProcess(url, port, zk_connect, handle, popen, log_path, config_path)
    return SecureRegistry(process, ca.cafile, password_files)


def nested_record(depth: int, extra_field: bool = False) -> str:
    """A record nested ``depth`` records deep; ``extra_field``: the innermost one has a field with a
    default more (a compatible change at the bottom)."""
    # R0 is at depth 0, R<k> at depth k, and the innermost field's type at depth ``depth``
    inner: dict[str, Any] = {
        "type": "record",
        "name": f"R{depth - 1}",
        "fields": [{"name": "leaf", "type": "long"}],
    }
    if extra_field:
        inner["fields"].append({"name": "more", "type": "string", "default": ""})
    for level in range(depth - 2, -1, -1):
        inner = {"type": "record", "name": f"R{level}", "fields": [{"name": f"f{level}", "type": inner}]}
    return json.dumps(inner)
