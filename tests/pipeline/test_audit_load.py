"""The audit end to end: audited producers on several hosts, real brokers, the load job in the session's
Spark, the load's counts published after its commit (and after a crash, by recovery), reconciliation.

One story, on one cluster whose brokers roll a segment per batch and delete segments whose newest record is
older than 30 days (so that retention can take a range the load has not read yet):

1. hosts web-1 and web-2 produce page views into windows W0..W3 of topic T (2 partitions) and three old ones
   into window A0 of topic L; the load commits them; the audit says COMPLETE with the exact numbers;
2. the faults, each in a window of its own: T's partition 0 is rewound by hand by 4 offsets of W2
   (duplicates); host web-3 produces 3 messages with W1 timestamps, after W1 was loaded (late), 5 good and
   2 malformed payloads into W4 (malformed), and 4 old messages into window A1 of L that retention deletes
   before the load reads them, skipped by ``on_out_of_range = earliest`` (loss);
3. that load crashes right after its commit point: its counts are committed but not published, and the
   audit shows those windows short; the next run recovers and publishes them;
4. the audit shows every fault in exactly its window and column; publishing again changes nothing; the CLI
   gives the same numbers as a table, JSON and HTML, and exits with 3.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from audit.audit_codec import AuditEventCodec
from audit.audit_reader import read_audit_events
from audit.audit_report import AuditReport, reconcile
from audit.audited_producer import audited_producer
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.cli import main as lumber
from lumber.config import LumberConfig
from pipeline.commit import CommitProtocol
from pipeline.fs import open_filesystem
from pipeline.load_audit_publisher import POINTER_NAME, LoadAuditPublisher
from pipeline.load_errors import InjectedFault
from pipeline.load_job import run_load
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.broker_cluster import wait_for
from tests.support.load_job import BASE_MS, load_config, page_view, unique_topic
from tests.support.registry import RegistryProcess

MINUTE = 60_000
W = 10 * MINUTE
DAY = 24 * 60 * MINUTE
#: windows of topic T (yesterday, 2026-11-22 08:00 ...) and of topic L (two old ones, and W4)
W0, W1, W2, W3, W4 = BASE_MS, BASE_MS + W, BASE_MS + 2 * W, BASE_MS + 3 * W, BASE_MS + 7 * W
A0 = 1_788_220_800_000  # 2026-09-01T00:00Z: older than the brokers' 30-day retention
A1 = A0 + 6 * W
SINCE = "2026-09-01"


class Views:
    """Page views of two topics, through one audited producer per host."""

    def __init__(
        self, cluster: Any, registry: RegistryProcess, serde: AvroSerde, ids: dict[str, int]
    ) -> None:
        self.cluster = cluster
        self.registry = registry
        self.serde = serde
        self.ids = ids
        self.n = 0

    def producer(self, host: str) -> Producer:
        return audited_producer(
            ProducerConfig(
                bootstrap_servers=self.cluster.bootstrap_servers.split(","),
                host_name=host,
                acks="all",
                linger_ms=0,
                max_block_ms=10_000,
                audit_interval_ms=3_600_000,  # only close() emits: the tests decide when counts appear
                audit_registry_url=self.registry.url,
            ),
            registry=RegistryConfig(url=self.registry.url),
        )

    def values(self, topic: str, count: int, ts_ms: int) -> list[bytes]:
        out = []
        for _ in range(count):
            out.append(self.serde.encode(self.ids[topic], page_view(self.n, ts_ms, v2=False)))
            self.n += 1
        return out

    def send(self, producer: Producer, topic: str, partition: int, window_ms: int, count: int) -> None:
        """``count`` views one second apart from the window's start, one record (and batch) each."""
        futures = [
            producer.send(topic, value, partition=partition, timestamp_ms=window_ms + 1000 * i)
            for i, value in enumerate(self.values(topic, count, window_ms))
        ]
        producer.flush()
        for future in futures:
            future.result(0)

    def send_batch(self, producer: Producer, topic: str, window_ms: int, count: int) -> None:
        """``count`` views in one batch (so in one segment of the brokers' log)."""
        producer.send_many(
            topic, self.values(topic, count, window_ms), partition=0, timestamp_ms=window_ms + 5
        )
        producer.flush()


def verify(cluster: Any, registry: RegistryProcess, topics: list[str], job: str) -> AuditReport:
    codec = AuditEventCodec(SchemaRegistryClient(registry.url))
    try:
        read = read_audit_events(
            ConsumerConfig(bootstrap_servers=cluster.bootstrap_servers.split(","), fetch_max_wait_ms=100),
            codec,
            topic="_audit",
        )
    finally:
        codec.close()
    now = time.time_ns() // 1_000_000
    return reconcile(
        read.events, since_ms=A0, until_ms=now, now_ms=now, topics=topics, job=job, unreadable=read.unreadable
    )


def rows(report: AuditReport, topic: str) -> dict[int, tuple[int, int, int, int, int, int, str]]:
    """Per window start: expected, loaded, missing, duplicate, late, malformed, status."""
    return {
        w.window_start_ms: (w.expected, w.loaded, w.missing, w.duplicate, w.late, w.malformed, w.status)
        for w in report.windows_of(topic)
    }


def quiet(_: str) -> None:
    pass


def with_load(config: LumberConfig, **load: Any) -> LumberConfig:
    return config.replace(load=config.load.replace(**load))


def rewind_by_hand(warehouse: Path, job: str, topic: str, partition: int, records: int) -> None:
    """What an operator does to load a partition again: a manifest that moves its offset back."""
    folder = warehouse / "_lumber" / job / "manifests"
    latest = json.loads(max(folder.glob("*.json")).read_text())
    sequence = latest["sequence"] + 1
    latest["offsets"][topic][str(partition)] -= records
    latest.update(
        sequence=sequence,
        run_id="rewind-by-hand",
        committed_at_ms=time.time_ns() // 1_000_000,
        ranges=[],
        counts=[],
        losses=[],
        files=[],
        staging=f"_lumber/{job}/staging/rewind-by-hand",
    )
    (folder / f"{sequence:020d}.json").write_text(json.dumps(latest))
    (warehouse / "_lumber" / job / "CURRENT").write_text(json.dumps({"sequence": sequence}))


def test_the_audit_finds_each_fault_in_its_window_and_column(
    start_cluster: Any,
    load_registry: RegistryProcess,
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = start_cluster(1, segment_bytes=128, retention_ms=30 * DAY, retention_check_interval_ms=100)
    t, loss_topic, job = unique_topic("page_view"), unique_topic("old_views"), unique_topic("job")
    cluster.create_topic(t, 2)
    cluster.create_topic(loss_topic, 1)
    # no _audit, and brokers create no topic on demand: the first audited producer creates it
    client = SchemaRegistryClient(load_registry.url)
    ids = {
        topic: client.register(f"{topic}-value", shipped_schema_text("page_view"))
        for topic in (t, loss_topic)
    }
    views = Views(cluster, load_registry, AvroSerde(client), ids)
    warehouse = tmp_path / "warehouse"
    config = load_config(
        zk_connect=cluster.zk_connect,
        registry_url=load_registry.url,
        bootstrap_servers=cluster.bootstrap_servers.split(","),
        warehouse=warehouse,
        job=job,
        topics=[t, loss_topic],
        on_out_of_range="earliest",
    )

    # 1. two hosts, several windows: COMPLETE with exact numbers
    web1, web2 = views.producer("web-1"), views.producer("web-2")
    for window, count in ((W0, 5), (W1, 4), (W2, 6)):
        views.send(web1, t, 0, window, count)
    for window, count in ((W0, 3), (W1, 2), (W3, 4)):
        views.send(web2, t, 1, window, count)
    views.send_batch(web2, loss_topic, A0, 3)
    web1.close()
    web2.close()
    first = run_load(spark, config, progress=quiet)
    assert (first.record.outcome, first.record.rows) == ("committed", 27)
    report = verify(cluster, load_registry, [t, loss_topic], job)
    assert rows(report, t) == {
        W0: (8, 8, 0, 0, 0, 0, "COMPLETE"),
        W1: (6, 6, 0, 0, 0, 0, "COMPLETE"),
        W2: (6, 6, 0, 0, 0, 0, "COMPLETE"),
        W3: (4, 4, 0, 0, 0, 0, "COMPLETE"),
    }
    assert rows(report, loss_topic) == {A0: (3, 3, 0, 0, 0, 0, "COMPLETE")}
    assert report.window(t, W0).hosts == {"web-1": 5, "web-2": 3}
    assert report.ok

    # 2. the faults
    rewind_by_hand(warehouse, job, t, 0, 4)  # offsets 11-14 of partition 0: the last 4 views of W2
    web3 = views.producer("web-3")
    views.send(web3, t, 1, W1, 3)  # late: W1 is loaded and complete
    views.send(web3, t, 1, W4, 5)
    good = views.values(t, 1, W4)[0]
    bad = [b"\x07" + good[1:], good[:5] + b"\xff" * 9]  # bad framing, corrupt Avro
    for value in bad:
        web3.send(t, value, partition=1, timestamp_ms=W4 + 30_000).result(10)
    views.send_batch(web3, loss_topic, A1, 4)  # older than retention: deleted once the next batch lands
    views.send_batch(web3, loss_topic, W4, 2)
    web3.close()
    tp = TopicPartition(loss_topic, 0)
    with Consumer(ConsumerConfig(bootstrap_servers=cluster.bootstrap_servers.split(","))) as reader:
        wait_for(lambda: reader.beginning_offsets([tp])[tp] == 7, 20, "retention to delete offsets 0-6")

    # 3. the load crashes right after its commit point: committed, not published
    with pytest.raises(InjectedFault, match="'manifest'"):
        run_load(spark, with_load(config, fault_injection=["commit:manifest"]), progress=quiet)
    short = verify(cluster, load_registry, [t, loss_topic], job)
    assert rows(short, t)[W1] == (9, 6, 3, 0, 0, 0, "INCOMPLETE")
    assert rows(short, t)[W4] == (7, 0, 7, 0, 0, 0, "INCOMPLETE")
    lines: list[str] = []
    recovered = run_load(spark, config, progress=lines.append)
    assert recovered.record.outcome == "nothing_to_load"
    assert recovered.recovery.rolled_forward == (3,)
    assert "audit: published 4 load counts of manifests 2-3 to _audit" in lines

    # 4. every fault in its window and column, with its exact count
    report = verify(cluster, load_registry, [t, loss_topic], job)
    expected_t = {
        W0: (8, 8, 0, 0, 0, 0, "COMPLETE"),
        W1: (9, 9, 0, 0, 3, 0, "COMPLETE"),  # late
        W2: (6, 10, 0, 4, 0, 0, "INCOMPLETE"),  # duplicates
        W3: (4, 4, 0, 0, 0, 0, "COMPLETE"),
        W4: (7, 5, 0, 0, 0, 2, "COMPLETE"),  # malformed
    }
    expected_loss = {
        A0: (3, 3, 0, 0, 0, 0, "COMPLETE"),
        A1: (4, 0, 4, 0, 0, 0, "INCOMPLETE"),  # lost to retention
        W4: (2, 2, 0, 0, 0, 0, "COMPLETE"),
    }
    assert rows(report, t) == expected_t
    assert rows(report, loss_topic) == expected_loss
    assert report.window(t, W1).hosts == {"web-1": 4, "web-2": 2, "web-3": 3}
    assert sorted((w.topic, w.window_start_ms) for w in report.failing) == sorted([(loss_topic, A1), (t, W2)])
    manifest = json.loads((warehouse / "_lumber" / job / "manifests" / f"{3:020d}.json").read_text())
    assert manifest["losses"] == [
        {"topic": loss_topic, "partition": 0, "from_offset": 3, "until_offset": 7, "reason": "out_of_range"}
    ]
    assert json.loads((warehouse / "_lumber" / job / POINTER_NAME).read_text()) == {"sequence": 3}
    unique_before = report.events_unique

    # publishing again never counts twice
    protocol = CommitProtocol(open_filesystem(str(warehouse)), job)
    assert LoadAuditPublisher(protocol, config).publish_manifests([1, 2, 3]) == 11
    again = verify(cluster, load_registry, [t, loss_topic], job)
    assert (rows(again, t), rows(again, loss_topic)) == (expected_t, expected_loss)
    assert (again.events_unique, again.events_read - again.events_unique) == (unique_before, 11)

    # the command line: the same numbers as a table, JSON and an HTML page; exit code 1
    path = tmp_path / "lumber.toml"
    servers = json.dumps(cluster.bootstrap_servers.split(","))
    path.write_text(
        f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n\n[registry]\nurl = "{load_registry.url}"\n\n'
        f'[consumer]\nbootstrap_servers = {servers}\nfetch_max_wait_ms = 100\n\n[load]\njob = "{job}"\n'
    )
    capsys.readouterr()
    base = ["--config", str(path), "audit", "verify", "--topic", t, "--topic", loss_topic, "--since", SINCE]
    base += ["--window", "10m"]  # the windows the events count in (the default is the loads' hour)
    html_path = tmp_path / "report" / "audit.html"
    assert lumber([*base, "--json", "--html", str(html_path)]) == 1
    found = json.loads(capsys.readouterr().out)
    assert {
        (w["topic"], w["window_start_ms"]): (
            w["expected"],
            w["loaded"],
            w["missing"],
            w["duplicate"],
            w["late"],
            w["malformed"],
            w["status"],
        )
        for w in found["windows"]
    } == {
        **{(t, k): v for k, v in expected_t.items()},
        **{(loss_topic, k): v for k, v in expected_loss.items()},
    }
    assert found["ok"] is False
    page = html_path.read_text()
    assert page.count('src="data:image/png;base64,') == 2
    assert page.count('<td class="INCOMPLETE">INCOMPLETE</td>') == 2
    assert lumber(base) == 1
    table = capsys.readouterr().out
    assert re.search(r"2026-11-22 08:20\s+6\s+10\s+0\s+4\s+0\s+0\s+0\s+INCOMPLETE", table)
    assert re.search(r"2026-11-22 08:10\s+9\s+9\s+0\s+0\s+3\s+0\s+0\s+COMPLETE", table)
    assert "FAILED: 2 windows INCOMPLETE" in table
    client.close()
