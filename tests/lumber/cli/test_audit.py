"""``lumber audit verify`` against a real broker and schema registry, with events published to ``_audit``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.audit_codec import AuditEventCodec
from audit.audit_event import AuditEvent, load_event_id, producer_event_id
from audit.errors import AuditError
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from lumber.cli import main as lumber
from lumber.cli.audit import parse_time_ms
from pipeline.durations import parse_duration_ms
from schemas.client import SchemaRegistryClient
from tests.support.registry import RegistryProcess

W = 600_000
HOUR = 3_600_000
T0 = 1_795_334_400_000  # 2026-11-22T08:00Z


def producer_event(window: int, count: int, host: str, at: int) -> AuditEvent:
    start = T0 + window * W
    return AuditEvent(
        "pv", "producer", host, start, W, count, count * 10, 0, 0,
        producer_event_id(host, f"{host}-1", "pv", start, W, 1), at, counter=f"{host}-1", sequence=1,
    )  # fmt: skip


def load_event(window: int, rows: int, at: int, malformed: int = 0) -> AuditEvent:
    start = T0 + window * W
    return AuditEvent(
        "pv", "load", "etl", start, W, rows, 0, malformed, 0,
        load_event_id("hourly", "r1", "pv", 0, start, W), at, partition=0, counter="r1", job="hourly",
    )  # fmt: skip


def publish(
    cluster: Any, registry: RegistryProcess, events: list[AuditEvent], raw: tuple[bytes, ...] = ()
) -> None:
    codec = AuditEventCodec(SchemaRegistryClient(registry.url))
    with Producer(ProducerConfig(bootstrap_servers=cluster.bootstrap_servers.split(","), acks="all")) as p:
        futures = [p.send("_audit", codec.encode(e), key=codec.key(e)) for e in events]
        futures += [p.send("_audit", value) for value in raw]
        for future in futures:
            future.result(10)
    codec.close()


@pytest.fixture
def config_path(broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path) -> Path:
    path = tmp_path / "lumber.toml"
    path.write_text(
        f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n\n[registry]\nurl = "{load_registry.url}"\n\n'
        f'[consumer]\nbootstrap_servers = ["{broker_cluster.bootstrap_servers}"]\nfetch_max_wait_ms = 100\n'
        "request_timeout_ms = 5000\n"
    )
    return path


def test_verify_prints_the_table_json_and_html_and_exits_by_the_verdict(
    broker_cluster: Any,
    load_registry: RegistryProcess,
    config_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    at = T0 + 2 * HOUR
    broker_cluster.create_topic("_audit", 1)  # brokers do not create topics on demand
    good = [producer_event(0, 5, "web-1", at), producer_event(0, 3, "web-2", at), load_event(0, 8, at + 1)]
    publish(broker_cluster, load_registry, [*good, good[0]])  # an event published twice counts once
    verify = ["--config", str(config_path), "audit", "verify", "--topic", "pv"]
    window = ["--since", "2026-11-22T08", "--until", "2026-11-22T09", "--now", "2026-11-22T12"]
    capsys.readouterr()
    # events count in 10-minute windows; the report's default is the loads' interval, an hour, and says so
    assert lumber([*verify, *window]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # nothing on stderr
    assert out == (
        "audit 2026-11-22 08:00 .. 2026-11-22 09:00 UTC, windows of 1h (the loads' interval, [schedule] "
        "every_ms; --window to change), grace 1h, tolerance 0, load job 'hourly'; 3 events (1 repeats "
        "dropped)\n"
        "\n"
        "topic pv\n"
        "  window (UTC)       expected     loaded   missing  duplicate    late  malformed   no ts  status\n"
        "  2026-11-22 08:00          8          8         0          0       0          0       0  COMPLETE\n"
        "  total                     8          8         0          0       0          0       0  "
        "1 COMPLETE\n"
        "\n"
        "OK\n"
    )
    assert lumber([*verify, *window, "--window", "10m"]) == 0
    assert capsys.readouterr().out.startswith(
        "audit 2026-11-22 08:00 .. 2026-11-22 09:00 UTC, windows of 10m (--window), grace 1h"
    )
    verify += ["--window", "10m"]

    # a window short by 2, one with a malformed record, and a record that is no audit event
    publish(
        broker_cluster,
        load_registry,
        [producer_event(1, 4, "web-1", at), load_event(1, 2, at + 1), producer_event(2, 3, "web-1", at),
         load_event(2, 2, at + 1, malformed=1)],
        raw=(b"not an audit event",),
    )  # fmt: skip
    assert lumber([*verify, *window, "--json", "--html", str(tmp_path / "audit.html")]) == 1
    found = json.loads(capsys.readouterr().out)
    assert [(w["window_start"], w["expected"], w["loaded"], w["missing"], w["malformed"], w["status"])
            for w in found["windows"]] == [
        ("2026-11-22 08:00", 8, 8, 0, 0, "COMPLETE"),
        ("2026-11-22 08:10", 4, 2, 2, 0, "INCOMPLETE"),
        ("2026-11-22 08:20", 3, 2, 0, 1, "COMPLETE"),
    ]  # fmt: skip
    assert found["events"] == {
        "read": 8, "unique": 7, "duplicates_dropped": 1, "conflicting_ids": [], "unreadable": 1,
    }  # fmt: skip
    assert found["notes"] == ["1 records of the audit topic are not audit events (skipped)"]
    page = (tmp_path / "audit.html").read_text()
    assert page.count('src="data:image/png;base64,') == 1
    assert '<span class="verdict failed">FAILED: 1 windows INCOMPLETE</span>' in page
    assert '<tr><td class=window>2026-11-22 08:10</td><td>4</td><td>2</td><td class="flag">2</td>' in page

    # the tolerance and the grace period
    assert lumber([*verify, *window, "--tolerance", "2"]) == 0
    assert lumber([*verify, *window, "--tolerance", "50%"]) == 0
    assert lumber([*verify, *window, "--tolerance", "49%"]) == 1
    within_grace = ["--since", "2026-11-22T08", "--until", "2026-11-22T09", "--now", "2026-11-22T09:00"]
    assert lumber([*verify, *within_grace]) == 0
    assert "2026-11-22 08:10          4          2         2" in capsys.readouterr().out
    assert lumber([*verify, *within_grace, "--grace", "0"]) == 1
    capsys.readouterr()
    assert lumber([*verify, *window, "--window", "1h", "--json"]) == 1
    hourly = json.loads(capsys.readouterr().out)["windows"]
    assert [(w["expected"], w["loaded"], w["missing"], w["malformed"]) for w in hourly] == [(15, 12, 2, 1)]


def test_verify_refuses_bad_arguments_and_a_missing_audit_topic(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verify = ["--config", str(config_path), "audit", "verify"]
    capsys.readouterr()
    assert lumber([*verify, "--grace", "soon"]) == 2
    assert "--grace 'soon': expected a duration such as 90s" in capsys.readouterr().err
    assert lumber([*verify, "--since", "2026-11-22T10", "--until", "2026-11-22T09"]) == 2
    assert "--until must be after --since" in capsys.readouterr().err
    assert lumber([*verify, "--tolerance", "a few"]) == 2
    assert "expected a count of messages" in capsys.readouterr().err
    assert lumber(verify) == 1
    assert "the audit topic _audit does not exist" in capsys.readouterr().err


def test_verify_of_an_empty_audit_topic_says_so(
    broker_cluster: Any, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broker_cluster.create_topic("_audit", 1)
    capsys.readouterr()
    args = [
        "--config",
        str(config_path),
        "audit",
        "verify",
        "--since",
        "2026-11-22T08",
        "--until",
        "2026-11-22T09",
    ]
    assert lumber(args) == 0
    out, err = capsys.readouterr()
    assert (out.splitlines()[1:], err) == (
        ["", "no audit events for windows in this range (for any topic)", "", "OK"],
        "",
    )


def test_verify_of_a_topic_that_does_not_exist_is_an_error(
    broker_cluster: Any, load_registry: RegistryProcess, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broker_cluster.create_topic("_audit", 1)
    broker_cluster.create_topic("quiet", 1)  # exists, has no traffic: nothing to verify, and that is OK
    publish(broker_cluster, load_registry, [producer_event(0, 5, "web-1", T0 + HOUR)])
    verify = ["--config", str(config_path), "audit", "verify", "--since", "2026-11-22T08", "--until"]
    verify += ["2026-11-22T09", "--now", "2026-11-22T12"]
    capsys.readouterr()
    assert lumber([*verify, "--topic", "nosuch_topic"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"lumber: error: --topic nosuch_topic: no such topic in the cluster ({broker_cluster.zk_connect}) "
        "and no audit events name it (topics with audit events: pv)\n"
    )
    assert lumber([*verify, "--topic", "pv,nosuch_topic,quiet"]) == 2
    assert "--topic nosuch_topic: no such topic" in capsys.readouterr().err
    assert lumber([*verify, "--topic", "quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "OK"


def test_times_and_durations() -> None:
    now = T0 + 5 * HOUR
    assert parse_time_ms("2026-11-22", now) == T0 - 8 * HOUR
    assert parse_time_ms("2026-11-22T08", now) == T0
    assert parse_time_ms("2026-11-22T08:30Z", now) == T0 + 30 * 60_000
    assert parse_time_ms("2026-11-22T08:30:15+00:00", now) == T0 + 30 * 60_000 + 15_000
    assert parse_time_ms("2026-11-22T10:00:00+02:00", now) == T0
    assert parse_time_ms(str(T0), now) == T0
    assert parse_time_ms("now", now) == now
    assert parse_time_ms("-6h", now) == now - 6 * HOUR
    assert [parse_duration_ms(d) for d in ("0", "90s", "30m", "2h30m", "1d", "250ms")] == [
        0, 90_000, 1_800_000, 9_000_000, 86_400_000, 250,
    ]  # fmt: skip
    with pytest.raises(AuditError, match="expected a UTC time"):
        parse_time_ms("yesterday", now)
