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
from tests.broker.client.group_helpers import member, produce, wait_settled
from tests.lumber.cli.test_groups import drain
from tests.support.broker_cluster import servers, wait_for


def test_lag_once_then_watched_with_metrics(broker_cluster: Any, tmp_path: Path) -> None:
    broker_cluster.create_topic("events", 2)
    produce(broker_cluster, "events", 2, 5)
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n\n'
        f"[consumer]\nbootstrap_servers = {json.dumps(servers(broker_cluster))}\nrequest_timeout_ms = 5000\n"
    )
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
            "status": None,
            "partitions": [
                {
                    "topic": "events",
                    "partition": 0,
                    "committed": 5,
                    "log_end": 5,
                    "lag": 0,
                    "status": None,
                    "samples": 1,
                },
                {
                    "topic": "events",
                    "partition": 1,
                    "committed": 2,
                    "log_end": 5,
                    "lag": 3,
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
                    return ("lumber_consumergroup_status", (("consumergroup", "audit"),)) in scraped

                wait_for(scrape, 10, "the lag metrics")
            finally:
                watcher.terminate()
                watcher.wait(timeout=30)
    labels = lambda p: (("consumergroup", "audit"), ("partition", str(p)), ("topic", "events"))  # noqa: E731
    assert scraped[("kafka_consumergroup_lag", labels(0))] == 0
    assert scraped[("kafka_consumergroup_lag", labels(1))] == 3
    assert scraped[("kafka_consumergroup_current_offset", labels(1))] == 2
    assert scraped[("kafka_topic_partition_current_offset", (("partition", "1"), ("topic", "events")))] == 5
    assert scraped[("lumber_consumergroup_partition_status", labels(0))] == 0
    assert scraped[("lumber_consumergroup_partition_status", labels(1))] == 3
    assert scraped[("lumber_consumergroup_status", (("consumergroup", "audit"),))] == 3
