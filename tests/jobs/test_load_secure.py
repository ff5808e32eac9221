"""``lumber etl run`` against a broker reached over SASL_SSL (issue 37): the load's credentials reach its
Spark tasks without showing anywhere.

``[load]`` holds the SASL password itself (the hardest case). A real ``spark-submit`` (local mode, the code
as a ``--py-files`` zip) with Spark's event log on loads the topic through the broker's SASL_SSL listener; the
rows and committed offsets are exactly what was produced. While it runs, the command line of every process
of the run is read from ``/proc``; then the command lines, ``lumber etl run``'s output, the run's Spark log,
Spark's event log and every other file of the run's state are searched for the password: no hit. The
effective config the driver reads is mode 0600.
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

from tests.support.broker_cluster import BrokerCluster
from tests.support.load_job import BASE_MS, LoadStack, load_stack
from tests.support.registry import RegistryProcess
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
