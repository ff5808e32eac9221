"""``lumber dev up --secure`` (lumber/dev/dev_security.py, dev_stack.py): the real stack with a SASL_SSL
listener, and the settings it prints used as they are by an unmodified confluent-kafka producer and consumer,
and by Lumber's own CLI through the secured config it writes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from broker.cluster.topic_admin import TopicAdmin
from tests.support.dev_ports import dev_port_env
from tests.support.zookeeper import new_client

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka import TopicPartition as ConfluentPartition

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

COUNT = 200


def stack_env() -> dict[str, str]:
    env = {
        **os.environ,
        **dev_port_env(),
    }
    env.pop("LUMBER_CONFIG", None)
    return env


def run(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )


def confluent_settings(secure: dict[str, Any]) -> dict[str, Any]:
    """The printed settings under the standard clients' names, nothing else."""
    listener: str = secure["listeners"][0]
    assert listener.startswith("SASL_SSL://127.0.0.1:")
    return {
        "bootstrap.servers": listener.removeprefix("SASL_SSL://"),
        "security.protocol": secure["security_protocol"],
        "sasl.mechanism": secure["sasl_mechanism"],
        "sasl.username": secure["sasl_username"],
        "sasl.password": secure["sasl_password"],
        "ssl.ca.location": secure["ssl_cafile"],
    }


def test_up_secure_prints_settings_confluent_kafka_and_the_cli_use(tmp_path: Path) -> None:
    env = stack_env()
    state_dir = tmp_path / "stack"
    up = run(env, "dev", "up", "--secure", "--json", "--state-dir", str(state_dir))
    try:
        assert up.returncode == 0, up.stderr
        summary = json.loads(up.stdout)
        secure = summary["secure"]
        assert secure["listeners"] == [f"SASL_SSL://127.0.0.1:{env['LUMBER_DEV__BROKER_SASL_SSL_PORT']}"]
        assert secure["sasl_mechanism"] == "SCRAM-SHA-512"
        assert secure["sasl_username"] == "lumber-dev"
        assert Path(secure["ssl_cafile"]).read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
        password_file = Path(secure["sasl_password_file"])
        assert password_file.read_text().splitlines() == [secure["sasl_password"]]
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(Path(secure["config_path"]).stat().st_mode) == 0o600

        client = new_client(summary["zookeeper_connect"])
        try:
            TopicAdmin(client).create_topic("secured", 1)
        finally:
            client.stop()
            client.close()
        settings = confluent_settings(secure)
        producer = ConfluentProducer({**settings, "acks": "all", "message.timeout.ms": 30_000})
        delivered: list[Any] = []
        for i in range(COUNT):
            producer.produce(
                "secured", f"v{i}".encode(), partition=0, on_delivery=lambda e, m: delivered.append((e, m))
            )
        assert producer.flush(60) == 0
        assert [e for e, _ in delivered] == [None] * COUNT
        assert sorted(m.offset() for _, m in delivered) == list(range(COUNT))

        consumer = ConfluentConsumer({**settings, "group.id": "secure-dev", "enable.auto.commit": False})
        got: list[tuple[int, bytes]] = []
        try:
            consumer.assign([ConfluentPartition("secured", 0, 0)])
            deadline = time.monotonic() + 60
            while len(got) < COUNT and time.monotonic() < deadline:
                for message in consumer.consume(500, 0.5):
                    assert message.error() is None, message.error()
                    got.append((message.offset() or 0, message.value() or b""))
        finally:
            consumer.close()
        assert got == [(i, f"v{i}".encode()) for i in range(COUNT)]

        # Lumber's own tools through the secured config the stack wrote (the password by file)
        secured_env = {**env, "LUMBER_CONFIG": secure["config_path"]}
        produced = run(secured_env, "produce", "secured", stdin="lumber-a\nlumber-b\n")
        assert produced.returncode == 0, produced.stderr
        consumed = run(secured_env, "consume", "secured", "--from-beginning", "--max", str(COUNT + 2))
        assert consumed.returncode == 0, consumed.stderr
        assert consumed.stdout.splitlines() == [f"v{i}" for i in range(COUNT)] + ["lumber-a", "lumber-b"]
        shown = run(secured_env, "config", "show")
        assert secure["sasl_password"] not in shown.stdout
        assert f'sasl_password_file = "{password_file}"' in shown.stdout
    finally:
        down = run(env, "dev", "down", "--state-dir", str(state_dir))
        assert down.returncode == 0, down.stderr
