"""The registry over HTTPS with HTTP Basic authentication (schemas/registry/basic_auth.py, server.py's TLS):
a real ``lumber schemas serve`` process, Confluent's unmodified SchemaRegistryClient with
``basic.auth.user.info``, and Lumber's own client from ``[registry]``.

An admin registers; a readonly user reads and looks up but may not register, delete or change compatibility
(403); no credentials, an unknown user or a wrong password get 401 with a Basic challenge; the registry's log
names the failed user, never a password.
"""

from __future__ import annotations

import ssl
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lumber.config import config_from_mapping
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port, start_and_wait, stop
from schemas.client import SchemaRegistryClient
from schemas.errors import RegistryRequestError
from schemas.shipped import shipped_schema_text
from tests.support.zookeeper import make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

ADMIN_PASSWORD = "Adm1n-Reg-4c7d0e"
READER_PASSWORD = "R3ader-Reg-9a1b2f"


class SecureRegistry:
    def __init__(self, url: str, cafile: Path, log_path: Path) -> None:
        self.url = url
        self.cafile = cafile
        self.log_path = log_path
        self.clients: list[ConfluentClient] = []

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def confluent(self, user_info: str | None) -> ConfluentClient:
        conf = {"url": self.url, "ssl.ca.location": str(self.cafile)}
        if user_info is not None:
            conf |= {"basic.auth.user.info": user_info}
        client = ConfluentClient(conf)
        self.clients.append(client)
        return client

    def http(self, auth: tuple[str, str] | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            verify=ssl.create_default_context(cafile=str(self.cafile)),
            auth=auth,
            timeout=10,
        )


@pytest.fixture
def secure_registry(zk_connect: str, tmp_path: Path) -> Iterator[SecureRegistry]:
    ca = CertificateAuthority(tmp_path / "ca")
    server = ca.issue("registry")
    users = tmp_path / "registry-users"
    users.write_text(
        f"# user: password,role\nadmin: {ADMIN_PASSWORD},admin\nreader: {READER_PASSWORD},readonly\n"
    )
    users.chmod(0o600)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    config = tmp_path / "registry.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{make_chroot(zk_connect, "secure-registry")}"\n\n'
        f'[registry]\nport = {port}\nurl = "{url}"\nssl_certfile = "{server.certfile}"\n'
        f'ssl_keyfile = "{server.keyfile}"\nauth_users_file = "{users}"\n'
    )
    registry = SecureRegistry(url, ca.cafile, tmp_path / "registry.log")

    def ready() -> bool:
        try:
            with registry.http() as client:
                return client.get("/").status_code == 401
        except httpx.HTTPError:
            return False

    argv = [sys.executable, "-m", "lumber", "--config", str(config), "schemas", "serve"]
    handle, popen = start_and_wait("registry", argv, registry.log_path, ready, timeout_s=60)
    try:
        yield registry
    finally:
        registry.close()
        stop(handle, popen=popen)
        popen.wait(timeout=30)


def test_confluent_client_with_basic_auth_over_https(secure_registry: SecureRegistry) -> None:
    schema = Schema(shipped_schema_text("search"), "AVRO")
    admin = secure_registry.confluent(f"admin:{ADMIN_PASSWORD}")
    schema_id = admin.register_schema("search-value", schema)
    assert schema_id == 1
    reader = secure_registry.confluent(f"reader:{READER_PASSWORD}")
    assert reader.get_schema(schema_id).schema_str == admin.get_schema(schema_id).schema_str
    assert reader.lookup_schema("search-value", schema).schema_id == schema_id
    assert reader.get_subjects() == ["search-value"]
    for denied in (
        lambda: reader.register_schema("other-value", schema),
        lambda: reader.delete_subject("search-value"),
        lambda: reader.set_compatibility("search-value", "NONE"),
    ):
        with pytest.raises(SchemaRegistryError) as refused:
            denied()
        assert refused.value.http_status_code == 403
        assert refused.value.error_code == 40301
    for user_info in (None, f"reader:{ADMIN_PASSWORD}", f"nobody:{READER_PASSWORD}"):
        with pytest.raises(SchemaRegistryError) as unauthorized:
            secure_registry.confluent(user_info).get_subjects()
        assert unauthorized.value.http_status_code == 401
    assert admin.get_subjects() == ["search-value"]  # nothing the readonly user asked for happened

    with secure_registry.http() as anonymous:
        answer = anonymous.get("/subjects")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Basic realm="lumber-registry"'
    log = secure_registry.log_path.read_text()
    assert "failed login as 'nobody'" in log
    assert "failed login as 'reader'" in log
    assert ADMIN_PASSWORD not in log
    assert READER_PASSWORD not in log


def test_lumbers_client_from_the_registry_section(secure_registry: SecureRegistry, tmp_path: Path) -> None:
    password_file = tmp_path / "reader.pass"
    password_file.write_text(READER_PASSWORD + "\n")
    admin = secure_registry.confluent(f"admin:{ADMIN_PASSWORD}")
    schema_id = admin.register_schema("click-value", Schema(shipped_schema_text("search"), "AVRO"))
    config = config_from_mapping(
        {
            "registry": {
                "url": secure_registry.url,
                "basic_auth_username": "reader",
                "basic_auth_password_file": str(password_file),
                "ssl_cafile": str(secure_registry.cafile),
            }
        }
    )
    with SchemaRegistryClient.from_config(config.registry) as client:
        assert READER_PASSWORD not in repr(client)
        assert client.get_versions("click-value") == [1]
        assert client.get_schema(schema_id).canonical
        with pytest.raises(RegistryRequestError, match=r"User 'reader' \(readonly\) may not POST") as denied:
            client.register("click-value", shipped_schema_text("search"))
        assert denied.value.error_code == 40301
    unauthenticated = config.registry.replace(basic_auth_username="", basic_auth_password_file="")
    with SchemaRegistryClient.from_config(unauthenticated) as client:
        with pytest.raises(RegistryRequestError, match="Unauthorized") as refused:
            client.get_versions("click-value")
        assert refused.value.error_code == 401
