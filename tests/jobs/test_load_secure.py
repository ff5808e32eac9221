"""``lumber etl run`` against a broker reached over SASL_SSL (issue 37): the load's credentials reach its
Spark tasks without showing anywhere.

``[load]`` holds the SASL password itself (the hardest case). A real ``spark-submit`` (local mode, the code
as a ``--py-files`` zip) with Spark's event log on loads the topic through the broker's SASL_SSL listener; the
rows and committed offsets are exactly what was produced. While it runs, the command line of every process
of the run is read from ``/proc``; then the command lines, ``lumber etl run``'s output, the run's Spark log,
Spark's event log and every other file of the run's state are searched for the password: no hit. The
effective config the driver reads is mode 0600.

The same through a registry over HTTPS whose every request must authenticate: ``[registry]`` names a
readonly user and its password file; the driver reads the file and the tasks, which fetch the writer schemas
by id, get the password inside their pickled settings (as the SASL password above), never by a command line,
Spark's conf or the effective config, which holds the file's path only. A wrong password fails the run
with one line naming the registry's URL and the 401, and loads nothing.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from audit.audit_event import AUDIT_TOPIC
from schemas.shipped import shipped_schema
from tests.support.broker_cluster import BrokerCluster
from tests.support.load_job import BASE_MS, LoadStack, load_stack
from tests.support.registry import READER_PASSWORD, RegistryProcess, SecureRegistry, launch_secure_registry
from tests.support.secure_broker import PASSWORD, USER, SecureBroker

pytestmark = [pytest.mark.spark, pytest.mark.zookeeper]


@pytest.fixture
def secure_stack(
    start_cluster: Callable[..., BrokerCluster], load_registry: RegistryProcess, tmp_path: Path
) -> Iterator[tuple[SecureBroker, LoadStack]]:
    secure = SecureBroker(start_cluster(0), tmp_path / "broker")
    with load_stack(secure.cluster, load_registry, tmp_path) as stack:
        yield secure, stack


def watch_cmdlines(marker: str, stop: threading.Event, seen: dict[int, bytes]) -> None:
    """Every process whose command line names ``marker``, until ``stop``."""
    while not stop.wait(0.1):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in seen:
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                seen[int(entry.name)] = cmdline


def test_a_load_over_sasl_ssl_never_shows_its_password(
    secure_stack: tuple[SecureBroker, LoadStack],
) -> None:
    secure, stack = secure_stack
    stack.views.views(0, 40, BASE_MS, 60_000, v2=False)
    stack.views.views(1, 25, BASE_MS + 30_000, 120_000, v2=True)
    event_log = stack.tmp / "spark-events"
    event_log.mkdir()
    config = stack.config()
    config = config.replace(
        load=config.load.replace(
            bootstrap_servers=[f"127.0.0.1:{secure.sasl_ssl_port}"],
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username=USER,
            sasl_password=PASSWORD,
            ssl_cafile=str(secure.ca.cafile),
        ),
        spark=config.spark.replace(
            conf=["spark.eventLog.enabled=true", f"spark.eventLog.dir=file://{event_log}"]
        ),
    )
    path = stack.config_file(config)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    seen: dict[int, bytes] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=watch_cmdlines, args=(str(stack.tmp), stop, seen), daemon=True)
    watcher.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "lumber", "--config", str(path), "etl", "run", "--master", "local[2]"],
            capture_output=True,
            timeout=300,
            env=env,
            check=False,
        )
    finally:
        stop.set()
        watcher.join(10)
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")
    assert b"committed manifest 1: 65 rows, 0 quarantined" in done.stdout
    stack.assert_rows_and_offsets()

    assert any(b"spark-submit" in c or b"SparkSubmit" in c for c in seen.values()), seen
    effective = stack.tmp / "state" / "etl" / f"{stack.job}.toml"
    assert stat.S_IMODE(effective.stat().st_mode) == 0o600
    assert PASSWORD in effective.read_text()  # the driver's one source, passed by path
    events = [p for p in event_log.rglob("*") if p.is_file()]
    assert events, "Spark wrote its event log"
    secret = PASSWORD.encode()
    hits = [f"cmdline of pid {pid}" for pid, c in seen.items() if secret in c]
    hits += ["lumber etl run's output"] if secret in done.stdout + done.stderr else []
    searched = [
        p
        for p in stack.tmp.rglob("*")
        if p.is_file() and p not in (effective, path) and p.suffix != ".parquet"
    ]
    hits += [str(p) for p in searched if secret in p.read_bytes()]
    assert hits == []
    assert any(p.parent == stack.tmp / "state" / "etl" / "logs" for p in searched)


@pytest.fixture
def registry_stack(
    start_cluster: Callable[..., BrokerCluster], zk_connect: str, tmp_path: Path
) -> Iterator[tuple[SecureRegistry, LoadStack]]:
    registry = launch_secure_registry(zk_connect, tmp_path / "registry")
    try:
        admin = registry.admin()  # the operator registers; the load's user only reads
        admin.register(f"{AUDIT_TOPIC}-value", shipped_schema("audit_event"))
        with load_stack(start_cluster(1), registry.process, tmp_path, client=admin) as stack:
            yield registry, stack
    finally:
        registry.stop()


def etl_run(path: Path, seen: dict[int, bytes], marker: str) -> subprocess.CompletedProcess[bytes]:
    """``lumber etl run`` of ``path`` in local mode, the command lines of its processes kept in ``seen``."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    stop = threading.Event()
    watcher = threading.Thread(target=watch_cmdlines, args=(marker, stop, seen), daemon=True)
    watcher.start()
    try:
        return subprocess.run(
            [sys.executable, "-m", "lumber", "--config", str(path), "etl", "run", "--master", "local[2]"],
            capture_output=True,
            timeout=300,
            env=env,
            check=False,
        )
    finally:
        stop.set()
        watcher.join(10)


def test_a_load_through_an_authenticating_registry_never_shows_its_password(
    registry_stack: tuple[SecureRegistry, LoadStack],
) -> None:
    registry, stack = registry_stack
    stack.views.views(0, 30, BASE_MS, 60_000, v2=False)
    stack.views.views(1, 20, BASE_MS + 30_000, 120_000, v2=True)
    event_log = stack.tmp / "spark-events"
    event_log.mkdir()
    config = stack.config()
    reader = config.registry.replace(
        basic_auth_username="reader",
        basic_auth_password_file=str(registry.password_files["reader"]),
        ssl_cafile=str(registry.cafile),
    )
    config = config.replace(
        registry=reader,
        spark=config.spark.replace(
            conf=["spark.eventLog.enabled=true", f"spark.eventLog.dir=file://{event_log}"]
        ),
    )
    wrong_file = stack.tmp / "wrong.password"
    wrong_file.write_text("not-the-password\n")
    seen: dict[int, bytes] = {}

    refused = etl_run(
        stack.config_file(config.replace(registry=reader.replace(basic_auth_password_file=str(wrong_file)))),
        seen,
        str(stack.tmp),
    )
    assert refused.returncode == 1, (refused.stdout + refused.stderr).decode(errors="replace")
    said = refused.stderr.decode()
    assert (
        f"GET {registry.url}/subjects/{stack.topic}-value/versions/latest: HTTP 401 Unauthorized: the schema "
        "registry refused user 'reader' ([registry] basic_auth_username and its password)"
    ) in said
    assert not (stack.warehouse / stack.topic).exists()  # nothing loaded

    done = etl_run(stack.config_file(config), seen, str(stack.tmp))
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")
    assert b"committed manifest 1: 50 rows, 0 quarantined" in done.stdout
    stack.assert_rows_and_offsets()

    assert any(b"spark-submit" in c or b"SparkSubmit" in c for c in seen.values()), seen
    effective = stack.tmp / "state" / "etl" / f"{stack.job}.toml"
    assert f'basic_auth_password_file = "{registry.password_files["reader"]}"' in effective.read_text()
    assert [p for p in event_log.rglob("*") if p.is_file()], "Spark wrote its event log"
    secret = READER_PASSWORD.encode()
    hits = [f"cmdline of pid {pid}" for pid, c in seen.items() if secret in c]
    hits += ["lumber etl run's output" for run in (refused, done) if secret in run.stdout + run.stderr]
    sources = set(registry.password_files.values())
    searched = [
        p
        for p in stack.tmp.rglob("*")
        if p.is_file()
        and p not in sources
        and p.name != "registry-users"  # the registry's own users file
        and p.suffix != ".parquet"
    ]
    hits += [str(p) for p in searched if secret in p.read_bytes()]
    assert hits == []
    assert any(p.parent == stack.tmp / "state" / "etl" / "logs" for p in searched)
