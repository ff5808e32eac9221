"""``lumber groups lag`` (lumber/cli/groups.py) as a subprocess against a live group of a real broker:
the lag once, then ``--watch`` with Burrow's status and its Prometheus metrics scraped and parsed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from broker.record.topic_partition import TopicPartition
from lumber.dev.process import free_port
from tests.broker.client.groups.group_helpers import member, produce, wait_settled
from tests.lumber.cli.test_groups import drain
from tests.support.broker_cluster import servers, wait_for
from tests.support.confluent_group import confluent_group_member

GROUP_LABELS = (("consumergroup", "audit"), ("kind", "zookeeper"))


def lag_config(tmp_path: Path, cluster: Any, *, request_timeout_ms: int = 5000) -> Path:
    """A ``lumber.toml`` pointing ``groups lag`` at ``cluster``'s ZooKeeper and brokers."""
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n\n'
        f"[consumer]\nbootstrap_servers = {json.dumps(servers(cluster))}\n"
        f"request_timeout_ms = {request_timeout_ms}\n"
    )
    return config


def test_lag_once_then_watched_with_metrics(broker_cluster: Any, tmp_path: Path) -> None:
    broker_cluster.create_topic("events", 2)
    produce(broker_cluster, "events", 2, 5)
    config = lag_config(tmp_path, broker_cluster)
    lag = [sys.executable, "-m", "lumber", "--config", str(config), "groups", "lag"]
    base = [*lag, "--group", "audit"]
    with member(broker_cluster, "audit", auto_commit_enable=False) as m:
        m.subscribe("events")
        wait_settled(broker_cluster, "audit", "events", 2, [m], 15)
        drain(m, 10)
        m.commit({TopicPartition("events", 0): 5, TopicPartition("events", 1): 2})

        once = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=60, check=False)
        assert once.returncode == 0, once.stderr
        assert json.loads(once.stdout) == {
            "group": "audit",
            "kind": "zookeeper",
            "status": None,
            "partitions": [
                {
                    "topic": "events",
                    "partition": 0,
                    "committed": 5,
                    "log_end": 5,
                    "lag": 0,
                    "no_commit": False,
                    "status": None,
                    "samples": 1,
                },
                {
                    "topic": "events",
                    "partition": 1,
                    "committed": 2,
                    "log_end": 5,
                    "lag": 3,
                    "no_commit": False,
                    "status": None,
                    "samples": 1,
                },
            ],
        }

        # every group (here the one): the same answer, one JSON line per group
        every = subprocess.run(
            [*lag, "--all-groups", "--json"], capture_output=True, text=True, timeout=60, check=False
        )
        assert every.returncode == 0, every.stderr
        assert every.stdout == once.stdout

        # watched: nobody commits partition 1 again, so it is STOPPED once two observations exist
        port = free_port()
        argv = [
            *base,
            "--watch",
            "--interval",
            "200ms",
            "--window",
            "3",
            "--count",
            "300",
            "--json",
            "--metrics-port",
            str(port),
        ]
        log_path = tmp_path / "watch.log"
        with (
            log_path.open("w") as log,
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True) as watcher,
        ):
            try:
                assert watcher.stdout is not None
                lines = [json.loads(watcher.stdout.readline()) for _ in range(3)]
                assert [line["status"] for line in lines] == [None, "STOPPED", "STOPPED"]
                assert [
                    (p["partition"], p["lag"], p["status"], p["samples"]) for p in lines[2]["partitions"]
                ] == [
                    (0, 0, "OK", 3),
                    (1, 3, "STOPPED", 3),
                ]
                scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

                def scrape() -> bool:
                    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                    scraped.clear()
                    for family in text_string_to_metric_families(text):
                        for sample in family.samples:
                            scraped[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
                    return ("lumber_consumergroup_status", GROUP_LABELS) in scraped

                wait_for(scrape, 10, "the lag metrics")
            finally:
                watcher.terminate()
                watcher.wait(timeout=30)
    labels = lambda p: (  # noqa: E731
        ("consumergroup", "audit"),
        ("kind", "zookeeper"),
        ("partition", str(p)),
        ("topic", "events"),
    )
    assert scraped[("kafka_consumergroup_lag", labels(0))] == 0
    assert scraped[("kafka_consumergroup_lag", labels(1))] == 3
    assert scraped[("kafka_consumergroup_current_offset", labels(1))] == 2
    assert scraped[("kafka_topic_partition_current_offset", (("partition", "1"), ("topic", "events")))] == 5
    assert scraped[("lumber_consumergroup_partition_status", labels(0))] == 0
    assert scraped[("lumber_consumergroup_partition_status", labels(1))] == 3
    assert scraped[("lumber_consumergroup_status", GROUP_LABELS)] == 3


def test_lag_of_a_kafka_group_beside_a_zookeeper_group(start_cluster: Any, tmp_path: Path) -> None:
    """A real confluent-kafka group (committed 5 and 2 of 5 and 5, then left) judged from OffsetFetch and
    ListOffsets, alone and beside a caught-up zookeeper group in the exporter mode (--all-groups)."""
    cluster = start_cluster(1, group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)
    cluster.create_topic("events", 2)
    produce(cluster, "events", 2, 5)
    config = lag_config(tmp_path, cluster)
    with member(cluster, "audit", auto_commit_enable=False) as m:
        m.subscribe("events")
        wait_settled(cluster, "audit", "events", 2, [m], 15)
        drain(m, 10)
        m.commit()  # 5 and 5: caught up
    with confluent_group_member(servers(cluster), "kg", "events", 10, {0: 5, 1: 2}):
        pass  # it left: the group is Empty, its offsets stay

    lag = [sys.executable, "-m", "lumber", "--config", str(config), "groups", "lag"]
    once = subprocess.run([*lag, "--group", "kg", "--json"], capture_output=True, text=True, timeout=60)
    assert once.returncode == 0, once.stderr
    assert json.loads(once.stdout) == {
        "group": "kg",
        "kind": "kafka",
        "state": "Empty",
        "status": None,
        "partitions": [
            {
                "topic": "events",
                "partition": 0,
                "committed": 5,
                "log_end": 5,
                "lag": 0,
                "no_commit": False,
                "status": None,
                "samples": 1,
            },
            {
                "topic": "events",
                "partition": 1,
                "committed": 2,
                "log_end": 5,
                "lag": 3,
                "no_commit": False,
                "status": None,
                "samples": 1,
            },
        ],
    }
    text = subprocess.run([*lag, "--group", "kg"], capture_output=True, text=True, timeout=60)
    assert (text.returncode, text.stderr) == (0, "")
    assert text.stdout == (
        "group 'kg' (kafka, state Empty): lag 3, status - (one observation: use --watch)\n"
        f"  {'topic':<20} {'partition':>9}  {'committed':>10}  {'log end':>10}  {'lag':>8}  status\n"
        f"  {'events':<20} {0:>9}  {5:>10}  {5:>10}  {0:>8}  -\n"
        f"  {'events':<20} {1:>9}  {2:>10}  {5:>10}  {3:>8}  -\n"
    )

    port = free_port()
    argv = [*lag, "--all-groups", "--watch", "--interval", "200ms", "--window", "3", "--count", "300"]
    with (
        (tmp_path / "watch.log").open("w") as log,
        subprocess.Popen(
            [*argv, "--json", "--metrics-port", str(port)], stdout=subprocess.PIPE, stderr=log, text=True
        ) as watcher,
    ):
        try:
            assert watcher.stdout is not None
            lines = [json.loads(watcher.stdout.readline()) for _ in range(6)]  # 3 observations of 2 groups
            assert [(line["group"], line["kind"], line["status"]) for line in lines] == [
                ("audit", "zookeeper", None),
                ("kg", "kafka", None),
                ("audit", "zookeeper", "OK"),
                ("kg", "kafka", "STOPPED"),  # nobody commits partition 1 again
                ("audit", "zookeeper", "OK"),
                ("kg", "kafka", "STOPPED"),
            ]
            assert [
                (p["partition"], p["lag"], p["status"], p["samples"]) for p in lines[4]["partitions"]
            ] == [
                (0, 0, "OK", 3),
                (1, 0, "OK", 3),
            ]
            assert [
                (p["partition"], p["lag"], p["status"], p["samples"]) for p in lines[5]["partitions"]
            ] == [
                (0, 0, "OK", 3),
                (1, 3, "STOPPED", 3),
            ]
            scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

            def scrape() -> bool:
                body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                scraped.clear()
                for family in text_string_to_metric_families(body):
                    for sample in family.samples:
                        scraped[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
                return (
                    "lumber_consumergroup_status",
                    (("consumergroup", "kg"), ("kind", "kafka")),
                ) in scraped

            wait_for(scrape, 10, "the lag metrics")
        finally:
            watcher.terminate()
            watcher.wait(timeout=30)
    labels = lambda g, k, p: (  # noqa: E731
        ("consumergroup", g),
        ("kind", k),
        ("partition", str(p)),
        ("topic", "events"),
    )
    assert scraped[("kafka_consumergroup_lag", labels("kg", "kafka", 0))] == 0
    assert scraped[("kafka_consumergroup_lag", labels("kg", "kafka", 1))] == 3
    assert scraped[("kafka_consumergroup_current_offset", labels("kg", "kafka", 1))] == 2
    assert scraped[("kafka_consumergroup_lag", labels("audit", "zookeeper", 1))] == 0
    assert scraped[("lumber_consumergroup_partition_status", labels("kg", "kafka", 1))] == 3
    assert scraped[("lumber_consumergroup_status", (("consumergroup", "kg"), ("kind", "kafka")))] == 3
    assert scraped[("lumber_consumergroup_status", (("consumergroup", "audit"), ("kind", "zookeeper")))] == 0


def test_a_watch_outlives_its_broker_killed_and_restarted(start_cluster: Any, tmp_path: Path) -> None:
    """The lag exporter that ``lumber dev up`` runs must outlive a failover (the demo kills a broker): while
    the only broker is down (kill -9), each observation fails with a warning on stderr and the watch goes
    on, its metrics still served; once the broker is back, it observes the group again."""
    cluster = start_cluster(1)
    cluster.create_topic("events", 1)
    produce(cluster, "events", 1, 3)
    config = lag_config(tmp_path, cluster, request_timeout_ms=2000)
    with member(cluster, "audit", auto_commit_enable=False) as m:
        m.subscribe("events")
        wait_settled(cluster, "audit", "events", 1, [m], 15)
        drain(m, 3)
        m.commit()  # 3 of 3
    port = free_port()
    argv = [sys.executable, "-m", "lumber", "--config", str(config), "groups", "lag", "--group", "audit"]
    argv += ["--watch", "--interval", "200ms", "--json", "--metrics-port", str(port)]
    out_path, err_path = tmp_path / "watch.out", tmp_path / "watch.err"
    with (
        out_path.open("w") as out,
        err_path.open("w") as err,
        subprocess.Popen(argv, stdout=out, stderr=err, text=True) as watcher,
    ):
        try:

            def observations() -> list[dict[str, Any]]:
                return [json.loads(line) for line in out_path.read_text().splitlines()]

            wait_for(lambda: len(observations()) >= 1, 30, "the first observation")
            lags = {(p["committed"], p["log_end"], p["lag"]) for p in observations()[0]["partitions"]}
            assert lags == {(3, 3, 0)}
            broker = cluster.brokers[0]
            broker.kill()
            failed = "lumber: warning: observation "
            wait_for(lambda: failed in err_path.read_text(), 60, "a failed observation")
            warning = next(line for line in err_path.read_text().splitlines() if line.startswith(failed))
            assert " of zookeeper group 'audit' failed (" in warning
            assert warning.endswith("); observing again in 200ms")
            assert watcher.poll() is None
            assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code == 200
            seen = len(observations())
            broker.start()
            wait_for(lambda: len(observations()) >= seen + 2, 60, "observations after the restart")
            assert {(p["committed"], p["log_end"], p["lag"]) for p in observations()[-1]["partitions"]} == {
                (3, 3, 0)
            }
            assert watcher.poll() is None
        finally:
            watcher.terminate()
            watcher.wait(timeout=30)


def test_a_partition_without_a_commit_counts_from_the_reset_position(
    broker_cluster: Any, tmp_path: Path
) -> None:
    """A Kafka-protocol group (confluent-kafka) consumes two partitions and has committed one: the other's
    lag is counted from the group's auto.offset.reset position, marked "no commit", in the total and in the
    exporter's metrics."""
    broker_cluster.create_topic("events", 2)
    produce(broker_cluster, "events", 2, 5)
    config = lag_config(tmp_path, broker_cluster)
    config.write_text(config.read_text() + 'auto_offset_reset = "earliest"\n')
    lag = [sys.executable, "-m", "lumber", "--config", str(config), "groups", "lag", "--group", "readers"]
    with confluent_group_member(servers(broker_cluster), "readers", "events", 10, {0: 4}):
        once = subprocess.run([*lag, "--json"], capture_output=True, text=True, timeout=60, check=False)
        assert once.returncode == 0, once.stderr
        rows = json.loads(once.stdout)["partitions"]
        assert [(p["partition"], p["committed"], p["log_end"], p["lag"], p["no_commit"]) for p in rows] == [
            (0, 4, 5, 1, False),
            (1, None, 5, 5, True),  # from the log start (earliest): all 5 records
        ]
        text = subprocess.run(lag, capture_output=True, text=True, timeout=60, check=False)
        lines = text.stdout.splitlines()
        assert (
            lines[0]
            == "group 'readers' (kafka, state Stable): lag 6, status - (one observation: use --watch)"
        )
        assert lines[3].split() == ["events", "1", "-", "5", "5", "no", "commit"]

        latest = tmp_path / "latest.toml"
        latest.write_text(config.read_text().replace('"earliest"', '"latest"'))
        from_end = subprocess.run(
            [sys.executable, "-m", "lumber", "--config", str(latest), *lag[5:], "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert [(p["lag"], p["no_commit"]) for p in json.loads(from_end.stdout)["partitions"]] == [
            (1, False),
            (0, True),  # latest: a consumer would start at the end
        ]

        port = free_port()
        argv = [*lag, "--watch", "--interval", "200ms", "--window", "3", "--count", "30", "--json"]
        argv += ["--metrics-port", str(port)]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as watcher:
            try:
                assert watcher.stdout is not None
                watched = [json.loads(watcher.stdout.readline()) for _ in range(2)]
                assert [(p["partition"], p["status"]) for p in watched[1]["partitions"]] == [
                    (0, "STOPPED"),
                    (1, "OK"),  # no commit to judge
                ]
                metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            finally:
                watcher.terminate()
                watcher.wait(timeout=30)
    found = {
        (s.name, s.labels.get("partition")): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.labels.get("consumergroup") == "readers"
    }
    assert found[("kafka_consumergroup_lag", "1")] == 5
    assert ("kafka_consumergroup_current_offset", "1") not in found  # nothing committed
    assert found[("kafka_consumergroup_lag_sum", None)] == 6
