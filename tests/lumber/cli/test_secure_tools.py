"""The CLI's tools on a secured cluster, and the secret that must never show (issue 37's grep test).

A real broker listens on SASL_SSL (tests/support/secure_broker.py); ``lumber.toml`` holds the SASL password
itself in ``[producer]``, ``[consumer]`` and ``[load]`` (the hardest case: a file or a variable would keep it
out of the config). ``lumber produce`` and ``lumber consume`` run over SASL_SSL with SCRAM-SHA-512;
``lumber config show`` masks the password; a wrong password fails with a one-line error naming the broker and
the mechanism. Then every stdout and stderr, every file the test's processes wrote (the broker's log among
them) and the ``/proc/<pid>/cmdline`` of every process started is searched for both passwords: no hit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.broker_cluster import BrokerCluster
from tests.support.secure_broker import PASSWORD, USER, SecureBroker

pytestmark = pytest.mark.zookeeper

WRONG = "Wr0ng-Pa55-8e21f7-never-printed"
LINES = [f"line-{i}" for i in range(50)]


def secure_config(path: Path, secure: SecureBroker, password: str, mechanism: str = "SCRAM-SHA-512") -> Path:
    client = (
        f'bootstrap_servers = ["127.0.0.1:{secure.sasl_ssl_port}"]\n'
        'security_protocol = "SASL_SSL"\n'
        f'sasl_mechanism = "{mechanism}"\n'
        f'sasl_username = "{USER}"\n'
        f'sasl_password = "{password}"\n'
        f'ssl_cafile = "{secure.ca.cafile}"\n'
    )
    path.write_text(
        f'[zookeeper]\nconnect = "{secure.cluster.zk_connect}"\n\n'
        f"[producer]\n{client}max_block_ms = 10000\n\n"
        f"[consumer]\n{client}request_timeout_ms = 10000\n\n"
        f"[load]\n{client}\n"
    )
    return path


class Tools:
    """Runs ``lumber`` commands, keeping their outputs and command lines to search."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.outputs: list[bytes] = []
        self.cmdlines: list[bytes] = []

    def run(
        self, *args: str, stdin: bytes = b"", config: Path | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        argv = [sys.executable, "-m", "lumber", "-v", "--config", str(config or self.config), *args]
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy()
        )
        self.cmdlines.append(self.cmdline_of(process.pid))
        stdout, stderr = process.communicate(stdin, timeout=120)
        self.outputs += [stdout, stderr]
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)

    @staticmethod
    def cmdline_of(pid: int) -> bytes:
        """The process's command line as the kernel shows it (``ps``), once the interpreter is running."""
        deadline = time.monotonic() + 10
        found = b""
        while time.monotonic() < deadline:
            try:
                found = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                break
            if b"lumber" in found:
                break
            time.sleep(0.01)
        return found


@pytest.fixture
def secure(start_cluster: Callable[..., BrokerCluster], tmp_path: Path) -> SecureBroker:
    return SecureBroker(start_cluster(0), tmp_path / "broker")


def test_produce_consume_config_show_and_a_refused_login_never_show_the_password(
    secure: SecureBroker, tmp_path: Path
) -> None:
    secure.cluster.create_topic("secured", 1)
    tools = Tools(secure_config(tmp_path / "lumber.toml", secure, PASSWORD))

    produced = tools.run("produce", "secured", stdin="\n".join(LINES).encode() + b"\n")
    assert produced.returncode == 0, produced.stderr
    consumed = tools.run("consume", "secured", "--from-beginning", "--max", str(len(LINES)))
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.decode().splitlines() == LINES

    shown = tools.run("config", "show")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.decode()
    assert text.count('sasl_password = "********"') == 3  # [producer], [consumer], [load]
    assert 'sasl_password_file = ""' in text

    wrong = tools.run(
        "produce", "secured", stdin=b"never\n", config=secure_config(tmp_path / "wrong.toml", secure, WRONG)
    )
    assert wrong.returncode == 1
    error = wrong.stderr.decode()
    assert f"broker 127.0.0.1:{secure.sasl_ssl_port}" in error
    assert "SASL SCRAM-SHA-512 login as 'alice' refused: SASL_AUTHENTICATION_FAILED" in error
    refused_consume = tools.run(
        "consume", "secured", "--from-beginning", "--max", "1", config=tmp_path / "wrong.toml"
    )
    assert refused_consume.returncode == 1
    assert "SCRAM-SHA-512 login as 'alice' refused" in refused_consume.stderr.decode()
    # PLAIN sends the password itself: a refused one, logged at DEBUG with tracebacks
    plain = secure_config(tmp_path / "plain.toml", secure, WRONG, mechanism="PLAIN")
    debugged = tools.run("--debug", "consume", "secured", "--from-beginning", "--max", "1", config=plain)
    assert debugged.returncode == 1
    assert "SASL PLAIN login as 'alice' refused: SASL_AUTHENTICATION_FAILED" in debugged.stderr.decode()
    assert b"Traceback (most recent call last)" in debugged.stderr

    # a consumer waiting for records: its command line while it runs, the broker's too
    waiting = subprocess.Popen(
        [sys.executable, "-m", "lumber", "-v", "--config", str(tools.config), "consume", "secured"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        tools.cmdlines.append(tools.cmdline_of(waiting.pid))
        time.sleep(2)
        assert waiting.poll() is None
    finally:
        waiting.terminate()
        stdout, stderr = waiting.communicate(timeout=30)
    tools.outputs += [stdout, stderr]
    assert secure.broker.popen is not None
    tools.cmdlines.append(Path(f"/proc/{secure.broker.popen.pid}/cmdline").read_bytes())
    assert "SCRAM-SHA-512" in secure.broker.log()  # the refused logins are logged, without the password

    secrets = (PASSWORD.encode(), WRONG.encode())
    hits = [
        f"output {i}" for i, output in enumerate(tools.outputs) for secret in secrets if secret in output
    ] + [f"cmdline {c!r}" for c in tools.cmdlines for secret in secrets if secret in c]
    own = {
        tmp_path / "lumber.toml",
        tmp_path / "wrong.toml",
        tmp_path / "plain.toml",
    }  # the test's configs: the secrets' source
    written = [path for path in tmp_path.rglob("*") if path.is_file() and path not in own]
    assert any(path.name.endswith(".log") for path in written), "the broker's log is searched"
    hits += [str(path) for path in written for secret in secrets if secret in path.read_bytes()]
    assert hits == []
    assert len(tools.cmdlines) == 8
    assert all(c for c in tools.cmdlines)
