"""Completeness end to end: audited producers on three hosts, a real broker killed under one of them, the
load (Spark in the session, and once as ``lumber etl run`` killed with SIGKILL), markers and events.

One story on one cluster, hours H1, H2, H3 of 2026-11-22 (long past their grace):

1. web-1 (``acks = all``) and web-2 (``acks = 0``) produce into H1, H2 and H3; web-2's four H2 views are
   written to the socket of the broker while it is stopped (SIGSTOP), then the broker is killed (SIGKILL)
   and restarted: they never reach the log, but web-2's audit counted them (``acks = 0`` counts what was
   written). A Spark-style empty ``_SUCCESS`` is in H3's folder before anything is loaded;
2. ``lumber etl run`` is SIGKILLed right after its commit, before any marker: manifest 1 is committed, no
   marker exists; the next run (nothing to load) writes H1's marker and event: the marker follows the
   committed manifest. H2 gets none and ``etl completeness`` names web-2 and 4; H3's foreign ``_SUCCESS`` is
   reported, and left byte for byte;
3. web-3 produces 2 late views into H1 and is not closed (its counts are not in the audit yet): the next load
   replaces H1's ``_SUCCESS`` by ``_INCOMPLETE`` and says INCOMPLETE; ``etl wait`` on H1, started then,
   returns 0 right after the load that follows web-3's close, which marks H1 COMPLETE again with 10 rows,
   each loaded once;
4. bad input: an hour in the future, a topic that does not exist, a timeout: clear errors and exit codes.

The same on HDFS, shorter (the embedded HDFS of the session, ``hdfs_url``): one load into an ``hdfs://``
warehouse marks an audited hour, ``etl completeness`` and ``etl wait`` (through hdfs-native and WebHDFS)
read the marker there, an unmarked hour's wait times out, a torn ``_SUCCESS`` on HDFS is named and kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from audit.audited_producer import audited_producer
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.config import LumberConfig, dump_config
from lumber.dev.hdfs_server import HdfsServer
from lumber.dev.process import free_port
from pipeline.commit import CommitProtocol
from pipeline.completeness_marker import hour_rel, hour_text
from pipeline.completeness_publisher import CompletenessPublisher
from pipeline.fs import open_filesystem
from pipeline.load_job import run_load
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.broker_cluster import servers, wait_for
from tests.support.fs_backends import Outside
from tests.support.load_job import (
    AUDIT_TOPIC,
    BASE_MS,
    HOUR_MS,
    load_config,
    load_stack,
    page_view,
    unique_topic,
)
from tests.support.registry import RegistryProcess
from tests.support.sigstop import pause

H1, H2, H3 = BASE_MS, BASE_MS + HOUR_MS, BASE_MS + 2 * HOUR_MS
COMPLETENESS_TOPIC = "_completeness"


class Views:
    """Page views through one audited producer per host; each view a record of its own."""

    def __init__(self, cluster: Any, registry: RegistryProcess, topic: str) -> None:
        self.cluster = cluster
        self.registry = registry
        self.topic = topic
        self.client = SchemaRegistryClient(registry.url)
        self.schema_id = self.client.register(f"{topic}-value", shipped_schema_text("page_view"))
        self.serde = AvroSerde(self.client)
        self.n = 0

    def producer(self, host: str, acks: str = "all") -> Producer:
        return audited_producer(
            ProducerConfig(
                bootstrap_servers=servers(self.cluster),
                host_name=host,
                acks=acks,  # type: ignore[arg-type]
                enable_idempotence=acks == "all",
                linger_ms=0,
                max_block_ms=10_000,
                audit_interval_ms=3_600_000,  # only close() emits: the test decides when counts appear
                audit_registry_url=self.registry.url,
            ),
            registry=RegistryConfig(url=self.registry.url),
        )

    def send(self, producer: Producer, hour_ms: int, count: int) -> None:
        """``count`` views a minute apart from 5 minutes into the hour, alternating partitions."""
        futures = []
        for i in range(count):
            ts = hour_ms + 300_000 + 60_000 * i
            value = self.serde.encode(self.schema_id, page_view(self.n, ts, v2=False))
            futures.append(producer.send(self.topic, value, partition=self.n % 2, timestamp_ms=ts))
            self.n += 1
        producer.flush()
        for future in futures:
            future.result(10)


def log_end(cluster: Any, topic: str) -> int:
    return sum(cluster.high_watermark(topic, p) for p in range(2))


def serves(cluster: Any, topic: str, records: int) -> bool:
    try:
        return log_end(cluster, topic) == records
    except Exception:
        return False


def hour_dir(warehouse: Path, topic: str, hour_ms: int) -> Path:
    day, hour = hour_text(hour_ms).split("T")
    return warehouse / topic / f"dt={day}" / f"hr={hour}"


def marker(warehouse: Path, topic: str, hour_ms: int, name: str = "_SUCCESS") -> dict[str, Any] | None:
    path = hour_dir(warehouse, topic, hour_ms) / name
    return json.loads(path.read_text()) if path.exists() else None


def hour_rows(warehouse: Path, topic: str, hour_ms: int) -> list[str]:
    table = ds.dataset(str(hour_dir(warehouse, topic, hour_ms)), format="parquet").to_table()
    return sorted(table.column("event_id").to_pylist())


def events(cluster: Any) -> list[tuple[str, str, int, int]]:
    """Every completeness event so far: (key, state, revision, loaded)."""
    tp = TopicPartition(COMPLETENESS_TOPIC, 0)
    found: list[tuple[str, str, int, int]] = []
    with Consumer(ConsumerConfig(bootstrap_servers=servers(cluster), fetch_max_wait_ms=100)) as consumer:
        end = consumer.end_offsets([tp])[tp]
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 20
        while len(found) < end and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=200):
                value = json.loads(record.value or b"")
                assert (record.key or b"").decode() == f"{value['topic']}/{value['hour']}"
                found.append((value["hour"], value["state"], value["revision"], value["loaded"]))
    return found


def lumber(config_path: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config_path), "etl", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def write_config(config: LumberConfig, tmp: Path) -> Path:
    path = tmp / "lumber.toml"
    text = dump_config(config).replace(
        '[dev]\nstate_dir = ".lumber"', f'[dev]\nstate_dir = "{tmp / "state"}"'
    )
    path.write_text(text)
    return path


def quiet(_: str) -> None:
    pass


@pytest.mark.slow
def test_hours_are_marked_when_the_audit_proves_them_complete_and_unmarked_when_late_data_comes(
    start_cluster: Any, load_registry: RegistryProcess, spark: Any, tmp_path: Path
) -> None:
    cluster = start_cluster(1)
    topic, job = unique_topic("page_view"), unique_topic("job")
    cluster.create_topic(topic, 2)
    cluster.create_topic(AUDIT_TOPIC, 1)
    views = Views(cluster, load_registry, topic)
    warehouse = tmp_path / "warehouse"
    config = load_config(
        zk_connect=cluster.zk_connect,
        registry_url=load_registry.url,
        bootstrap_servers=servers(cluster),
        warehouse=warehouse,
        job=job,
        topics=[topic],
    )
    config_path = write_config(config, tmp_path)

    # 1. three hours from two hosts; web-2's H2 views die in the socket of a stopped, then killed broker
    web1, web2 = views.producer("web-1"), views.producer("web-2", acks="0")
    views.send(web1, H1, 5)
    views.send(web1, H2, 4)
    views.send(web1, H3, 3)
    views.send(web2, H1, 3)
    views.send(web2, H3, 2)
    wait_for(lambda: log_end(cluster, topic) == 17, 20, "the 17 views in the logs")
    broker = cluster.brokers[0]
    assert broker.popen is not None
    pause(broker.popen.pid)
    views.send(web2, H2, 4)  # acks = 0: done once written to the socket, and counted
    broker.kill()
    broker.restart()
    wait_for(lambda: serves(cluster, topic, 17), 60, "the restarted broker to serve the 17 views")
    web1.close()
    web2.close()
    assert log_end(cluster, topic) == 17
    foreign = hour_dir(warehouse, topic, H3) / "_SUCCESS"
    foreign.parent.mkdir(parents=True)
    foreign.write_bytes(b"")  # what Spark's output committer leaves

    # 2. SIGKILL between the commit and the markers: committed, unmarked; the next run marks
    killed = subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config_path), "etl", "run"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "LUMBER_LOAD__FAULT_INJECTION": '["commit:completeness:kill"]'},
    )
    assert killed.returncode != 0, killed.stdout + killed.stderr
    manifests = warehouse / "_lumber" / job / "manifests"
    assert sorted(p.name for p in manifests.glob("[0-9]*.json")) == [f"{1:020d}.json"]
    assert marker(warehouse, topic, H1) is None
    assert COMPLETENESS_TOPIC not in cluster.admin.list_topics()
    lines: list[str] = []
    second = run_load(spark, config, progress=lines.append)
    assert second.record.outcome == "nothing_to_load"
    h1 = marker(warehouse, topic, H1)
    assert h1 is not None
    assert (h1["state"], h1["revision"], h1["expected"], h1["loaded"], h1["quarantined"]) == (
        "COMPLETE",
        1,
        8,
        8,
        0,
    )
    assert (h1["manifest_sequence"], h1["job"], h1["hour"]) == (1, job, hour_text(H1))
    assert marker(warehouse, topic, H2) is None
    assert foreign.read_bytes() == b""  # not Lumber's: left as it was
    assert any("_SUCCESS" in line and "not a Lumber marker" in line for line in lines), lines
    assert events(cluster) == [(hour_text(H1), "COMPLETE", 1, 8)]

    shown = lumber(config_path, "completeness", "--topic", topic, "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    states = {h["hour"]: (h["state"], h["expected"], h["loaded"], h["missing"]) for h in report["hours"]}
    assert states == {hour_text(H1): ("COMPLETE", 8, 8, 0), hour_text(H2): ("INCOMPLETE", 8, 4, 4)}
    (h2,) = [h for h in report["hours"] if h["hour"] == hour_text(H2)]
    assert h2["hosts_missing"] == {"web-2": 4}
    assert len(report["errors"]) == 1
    assert str(foreign) in report["errors"][0]
    text = lumber(config_path, "completeness", "--topic", topic)
    assert "missing from web-2: 4" in text.stdout, text.stdout

    # 3. late data into the marked H1: INCOMPLETE, then COMPLETE once its counts come; nothing counted twice
    web3 = views.producer("web-3")
    views.send(web3, H1, 2)
    third = run_load(spark, config, progress=quiet)
    assert (third.record.outcome, third.record.rows) == ("committed", 2)
    assert marker(warehouse, topic, H1) is None
    revoked = marker(warehouse, topic, H1, "_INCOMPLETE")
    assert revoked is not None
    assert (revoked["state"], revoked["revision"], revoked["expected"], revoked["loaded"]) == (
        "INCOMPLETE",
        2,
        8,
        10,
    )
    waiting = subprocess.Popen(
        [
            *(sys.executable, "-m", "lumber", "--config", str(config_path), "etl", "wait"),
            *("--topic", topic, "--hour", hour_text(H1), "--timeout", "3m", "--interval", "200ms"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3)
        assert waiting.poll() is None, waiting.communicate()
        web3.close()
        fourth = run_load(spark, config, progress=quiet)
        loaded_at = time.monotonic()
        out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 0, out + err
        assert time.monotonic() - loaded_at < 10
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert fourth.record.outcome == "nothing_to_load"
    h1 = marker(warehouse, topic, H1)
    assert h1 is not None
    assert (h1["state"], h1["revision"], h1["expected"], h1["loaded"]) == ("COMPLETE", 3, 10, 10)
    assert marker(warehouse, topic, H1, "_INCOMPLETE") is None
    assert hour_rows(warehouse, topic, H1) == sorted({*hour_rows(warehouse, topic, H1)})
    assert len(hour_rows(warehouse, topic, H1)) == 10
    assert events(cluster) == [
        (hour_text(H1), "COMPLETE", 1, 8),
        (hour_text(H1), "INCOMPLETE", 2, 10),
        (hour_text(H1), "COMPLETE", 3, 10),
    ]
    again = run_load(spark, config, progress=quiet)  # nothing changed: no marker, no event
    assert again.record.outcome == "nothing_to_load"
    assert len(events(cluster)) == 3
    assert foreign.read_bytes() == b""

    views.client.close()

    # 4. bad input
    future = lumber(config_path, "wait", "--topic", topic, "--hour", "2099-01-01T00", "--timeout", "1s")
    assert future.returncode == 2
    assert "hour 2099-01-01T00 has not begun yet" in future.stderr
    missing = lumber(config_path, "wait", "--topic", "no_such_topic", "--hour", hour_text(H1))
    assert missing.returncode == 2
    assert "topic 'no_such_topic' does not exist in the cluster" in missing.stderr
    timed_out = lumber(config_path, "wait", "--topic", topic, "--hour", hour_text(H2), "--timeout", "1s")
    assert timed_out.returncode == 1
    assert f"{topic}/{hour_text(H2)} not complete after 1s" in timed_out.stderr
    foreign_wait = lumber(config_path, "wait", "--topic", topic, "--hour", hour_text(H3), "--timeout", "1s")
    assert foreign_wait.returncode == 2
    assert "not a Lumber marker" in foreign_wait.stderr
    unknown = lumber(config_path, "completeness", "--topic", "no_such_topic")
    assert unknown.returncode == 2
    assert f"topic 'no_such_topic' is not loaded by job '{job}' (it loads: {topic})" in unknown.stderr
    ahead = lumber(config_path, "completeness", "--since", "2099-01-01T00")
    assert ahead.returncode == 2
    assert "--since 2099-01-01T00 is in the future" in ahead.stderr


def test_without_producer_audit_the_partitions_watermarks_decide(
    broker_cluster: Any, load_registry: RegistryProcess, spark: Any, tmp_path: Path
) -> None:
    """``require = "watermark"``: partition 0 holds H1 and H3 views and is loaded up to H3 (the cutoff),
    partition 1 only H1 views, loaded to its end. With a 10-minute grace both have passed H1's end + grace
    (partition 0's committed offset is its first H3 view's, partition 1 is at its log end): H1 is marked.
    With a 2-hour grace partition 0 has no record past it and H3's two views are still to load: H1 would
    be withdrawn (LATE)."""
    with load_stack(broker_cluster, load_registry, tmp_path) as stack:
        stack.views.views(0, 3, H1 + 60_000, 60_000, v2=False)
        stack.views.views(1, 2, H1 + 90_000, 60_000, v2=True)
        stack.views.views(0, 2, H3 + 60_000, 60_000, v2=False)
        base = stack.config()
        config = base.replace(completeness=base.completeness.replace(require="watermark"))
        outcome = run_load(spark, config, cutoff_ms=H2 + HOUR_MS, progress=quiet)
        assert (outcome.record.outcome, outcome.record.rows) == ("committed", 5)
        h1 = marker(stack.warehouse, stack.topic, H1)
        assert h1 is not None
        assert (h1["state"], h1["require"], h1["expected"], h1["loaded"], h1["revision"]) == (
            "COMPLETE",
            "watermark",
            None,
            5,
            1,
        )
        strict = config.replace(completeness=config.completeness.replace(grace_ms=2 * HOUR_MS))
        protocol = CommitProtocol(open_filesystem(str(stack.warehouse)), stack.job)
        (decided,) = CompletenessPublisher(protocol, strict).decide(now_ms=time.time_ns() // 1_000_000).hours
        # decided again (read only) under the strict grace: the marked hour would be withdrawn
        assert (decided.hour, decided.state, decided.loaded) == (hour_text(H1), "LATE", 5)
        assert decided.reason == (
            "partitions not loaded past the hour's end + grace: 0 (committed 3, log end 5)"
        )


def test_an_audited_hour_is_marked_on_hdfs_and_etl_completeness_and_wait_read_it_there(
    broker_cluster: Any,
    load_registry: RegistryProcess,
    spark: Any,
    hdfs_server: HdfsServer,
    hdfs_url: str,
    tmp_path: Path,
) -> None:
    """The warehouse on the embedded HDFS (hdfs-native, what ``hdfs_client = "auto"`` picks without
    libhdfs). web-1 produces 5 views into H1 and 3 into H3 and closes (its audit counts are emitted); web-2
    produces 3 into H2 and stays open (no producer counted H2). H3's folder holds a torn ``_SUCCESS``
    before the load. One load (Spark) writes H1's ``_SUCCESS`` on HDFS with the exact counts; the CLI
    reads it from there (``etl completeness --json``, ``etl wait``, through hdfs-native and through
    WebHDFS as ``[load] hdfs_client`` says); H2's wait times out (exit 1); H3's torn marker is named by
    its hdfs:// URL, by the load and both commands, and is left byte for byte."""
    cluster = broker_cluster
    topic, job = unique_topic("page_view"), unique_topic("job")
    cluster.create_topic(topic, 2)
    cluster.create_topic(AUDIT_TOPIC, 1)
    views = Views(cluster, load_registry, topic)
    warehouse = f"{hdfs_url}/warehouse"
    h3_folder = Outside(f"{warehouse}/{hour_rel(topic, H3)}")
    torn = b'{"format": 1, "kind": "lumber-completeness", "job": "'
    h3_folder.write("_SUCCESS", torn)  # a torn file, left by another writer
    web1, web2 = views.producer("web-1"), views.producer("web-2")
    try:
        views.send(web1, H1, 5)
        views.send(web1, H3, 3)
        web1.close()
        views.send(web2, H2, 3)
        wait_for(lambda: log_end(cluster, topic) == 11, 20, "the 11 views in the logs")
        settings: dict[str, Any] = {
            "zk_connect": cluster.zk_connect,
            "registry_url": load_registry.url,
            "bootstrap_servers": servers(cluster),
            "warehouse": warehouse,
            "job": job,
            "topics": [topic],
        }
        config = load_config(**settings)
        (tmp_path / "native").mkdir()
        native = write_config(config, tmp_path / "native")
        lines: list[str] = []
        outcome = run_load(spark, config, progress=lines.append)
        assert (outcome.record.outcome, outcome.record.rows, outcome.record.quarantined) == (
            "committed",
            11,
            0,
        )

        # H1's marker, read from HDFS without pipeline.fs
        h1_folder = Outside(f"{warehouse}/{hour_rel(topic, H1)}")
        assert [n for n in h1_folder.names() if not n.endswith(".parquet")] == ["_SUCCESS"]
        h1 = json.loads(h1_folder.read("_SUCCESS"))
        assert (h1["state"], h1["revision"], h1["expected"], h1["loaded"], h1["quarantined"]) == (
            "COMPLETE",
            1,
            5,
            5,
            0,
        )
        assert (h1["missing"], h1["duplicate"], h1["manifest_sequence"], h1["job"], h1["hour"]) == (
            0,
            0,
            1,
            job,
            hour_text(H1),
        )
        assert h1["manifest_run_id"] == outcome.record.run_id
        h2_folder = Outside(f"{warehouse}/{hour_rel(topic, H2)}")
        assert [n for n in h2_folder.names() if not n.endswith(".parquet")] == []
        h3_url = f"{warehouse}/{hour_rel(topic, H3)}/_SUCCESS"
        assert h3_folder.read("_SUCCESS") == torn
        assert [n for n in h3_folder.names() if not n.endswith(".parquet")] == ["_SUCCESS"]
        assert any(h3_url in line and "not a Lumber marker" in line for line in lines), lines
        assert events(cluster) == [(hour_text(H1), "COMPLETE", 1, 5)]

        # the CLI, as a scheduler runs it: H2's wait times out while the others run
        def wait(config_path: Path, hour_ms: int, timeout: str = "10s") -> list[str]:
            return [
                *(sys.executable, "-m", "lumber", "--config", str(config_path), "etl", "wait"),
                *("--topic", topic, "--hour", hour_text(hour_ms), "--timeout", timeout, "--interval", "1s"),
            ]

        started = time.monotonic()
        h2_wait = subprocess.Popen(
            wait(native, H2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            shown = lumber(native, "completeness", "--topic", topic, "--json")
            assert shown.returncode == 0, shown.stderr
            report = json.loads(shown.stdout)
            states = {
                h["hour"]: (h["state"], h["expected"], h["loaded"], h["missing"], h["marked_revision"])
                for h in report["hours"]
            }
            assert states == {
                hour_text(H1): ("COMPLETE", 5, 5, 0, 1),
                hour_text(H2): ("INCOMPLETE", 0, 3, 0, 0),
            }
            assert len(report["errors"]) == 1
            assert report["errors"][0].startswith(f"{h3_url}: not a valid completeness marker: not JSON")
            assert "not a Lumber marker" in report["errors"][0]

            done = subprocess.run(wait(native, H1), capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            h1_url = f"{warehouse}/{hour_rel(topic, H1)}/_SUCCESS"
            assert done.stdout == (
                f"{topic}/{hour_text(H1)} complete (revision 1, manifest 1): 5 rows, 0 quarantined; "
                f"{h1_url}\n"
            )
            (tmp_path / "webhdfs").mkdir()
            over_http = write_config(
                load_config(**settings, hdfs_client="webhdfs", webhdfs_url=hdfs_server.webhdfs_url),
                tmp_path / "webhdfs",
            )
            done = subprocess.run(
                wait(over_http, H1), capture_output=True, text=True, timeout=60, check=False
            )
            assert (done.returncode, done.stdout.endswith(f"; {h1_url}\n")) == (0, True), done.stderr
            (tmp_path / "nowhere").mkdir()
            unreachable = write_config(
                load_config(**settings, hdfs_client="webhdfs", webhdfs_url=f"http://127.0.0.1:{free_port()}"),
                tmp_path / "nowhere",
            )
            refused = subprocess.run(
                wait(unreachable, H1), capture_output=True, text=True, timeout=60, check=False
            )
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert refused.stderr.startswith(f"lumber etl wait: stat {h1_url}: "), refused.stderr

            foreign = subprocess.run(
                wait(native, H3), capture_output=True, text=True, timeout=60, check=False
            )
            assert foreign.returncode == 2, foreign.stdout + foreign.stderr
            assert foreign.stderr.startswith(
                f"lumber etl wait: {h3_url}: not a valid completeness marker: not JSON"
            ), foreign.stderr
            assert "not a Lumber marker" in foreign.stderr

            out, err = h2_wait.communicate(timeout=60)
            waited = time.monotonic() - started
        finally:
            if h2_wait.poll() is None:
                h2_wait.kill()
        assert h2_wait.returncode == 1, out + err
        h2_url = f"{warehouse}/{hour_rel(topic, H2)}/_SUCCESS"
        assert (
            err
            == f"lumber etl wait: {topic}/{hour_text(H2)} not complete after 10s ({h2_url} is not there)\n"
        )
        assert waited >= 10
        assert h3_folder.read("_SUCCESS") == torn  # never overwritten
    finally:
        web2.close()
        views.client.close()
