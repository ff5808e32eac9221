"""The example Airflow DAG, run by Apache Airflow (``make airflow``'s ``.airflow-venv``) against a real stack.

A broker, ZooKeeper and the registry; an audited producer writes views into two hours; ``airflow dags test``
runs ``lumber_load_<job>`` for the two hours one after the other, each run: the grace sensor, ``lumber etl
run --until-hour`` (spark-submit), then ``lumber etl wait`` for the hour's ``_SUCCESS`` and the topic's
Asset emitted with the marker. Checked: one manifest per hour with exactly that hour's rows, each hour's
marker, the two Asset events in Airflow's database with the markers as ``extra``, and the downstream example
DAG queued to run on them (``asset_dag_run_queue``: what Airflow's scheduler turns into its runs).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from audit.audited_producer import audited_producer
from broker.client.producer.producer_config import ProducerConfig
from lumber.config import dump_config
from pipeline.completeness_marker import hour_text
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.broker_cluster import servers
from tests.support.load_job import AUDIT_TOPIC, BASE_MS, HOUR_MS, load_config, page_view, unique_topic
from tests.support.registry import RegistryProcess

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = ROOT / ".airflow-venv" / "bin" / "airflow"
H1, H2 = BASE_MS, BASE_MS + HOUR_MS


def airflow(env: dict[str, str], *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(AIRFLOW), *args], env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert done.returncode == 0, (
        f"airflow {' '.join(args)}: exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done


@pytest.mark.slow
def test_airflow_runs_the_load_for_two_hours_and_emits_each_complete_hour_as_an_asset(
    broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path
) -> None:
    assert AIRFLOW.exists(), f"{AIRFLOW} is missing: run `make airflow` first (make pytest does)"
    cluster = broker_cluster
    topic, job = unique_topic("page_view"), unique_topic("job")
    cluster.create_topic(topic, 2)
    cluster.create_topic(AUDIT_TOPIC, 1)
    client = SchemaRegistryClient(load_registry.url)
    schema_id = client.register(f"{topic}-value", shipped_schema_text("page_view"))
    serde = AvroSerde(client)
    producer = audited_producer(
        ProducerConfig(
            bootstrap_servers=servers(cluster),
            host_name="web-1",
            acks="all",
            linger_ms=0,
            audit_interval_ms=3_600_000,  # close() emits
            audit_registry_url=load_registry.url,
        ),
        registry=RegistryConfig(url=load_registry.url),
    )
    n = 0
    for hour, count in ((H1, 4), (H2, 3)):
        for i in range(count):
            ts = hour + 120_000 * (i + 1)
            producer.send(
                topic, serde.encode(schema_id, page_view(n, ts, v2=False)), partition=n % 2, timestamp_ms=ts
            )
            n += 1
    producer.flush()
    producer.close()
    client.close()

    warehouse = tmp_path / "warehouse"
    config = load_config(
        zk_connect=cluster.zk_connect,
        registry_url=load_registry.url,
        bootstrap_servers=servers(cluster),
        warehouse=warehouse,
        job=job,
        topics=[topic],
    )
    config_path = tmp_path / "lumber.toml"
    config_path.write_text(
        dump_config(config).replace(
            '[dev]\nstate_dir = ".lumber"', f'[dev]\nstate_dir = "{tmp_path / "state"}"'
        )
    )
    home = tmp_path / "airflow"
    dags = home / "dags"
    dags.mkdir(parents=True)
    for name in ("airflow_dag_example.py", "airflow_downstream_example.py"):
        shutil.copy(ROOT / "jobs" / name, dags / name)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",  # a paused DAG is not queued on its assets
        "LUMBER_HOME": str(ROOT),
        "LUMBER_CONFIG": str(config_path),
        "LUMBER_JOB": job,
        "LUMBER_TOPICS": topic,
        "LUMBER_SPARK_MASTER": "local[2]",
        "LUMBER_GRACE_MINUTES": "10",
        "LUMBER_WAIT": "2m",
    }
    airflow(env, "db", "migrate")
    airflow(env, "dags", "reserialize")
    for hour in (H1, H2):  # Airflow 3 runs a manual run at T for the data interval that ends at T
        airflow(env, "dags", "test", f"lumber_load_{job}", f"{hour_text(hour + HOUR_MS)}:00:00+00:00")

    manifests = sorted((warehouse / "_lumber" / job / "manifests").glob("[0-9]*.json"))
    assert len(manifests) == 2
    rows = [sum(r["rows"] for r in json.loads(p.read_text())["ranges"]) for p in manifests]
    assert rows == [4, 3]
    markers = {}
    for hour in (H1, H2):
        day, hr = hour_text(hour).split("T")
        markers[hour] = json.loads((warehouse / topic / f"dt={day}" / f"hr={hr}" / "_SUCCESS").read_text())
    assert [(m["loaded"], m["expected"], m["manifest_sequence"], m["state"]) for m in markers.values()] == [
        (4, 4, 1, "COMPLETE"),
        (3, 3, 2, "COMPLETE"),
    ]

    with sqlite3.connect(home / "airflow.db") as db:
        events = db.execute(
            "SELECT a.uri, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id ORDER BY e.id"
        ).fetchall()
        queued = db.execute("SELECT target_dag_id FROM asset_dag_run_queue").fetchall()
    assert [(uri, json.loads(extra)["hour"], json.loads(extra)["loaded"]) for uri, extra in events] == [
        (f"lumber://{job}/{topic}", hour_text(H1), 4),
        (f"lumber://{job}/{topic}", hour_text(H2), 3),
    ]
    assert queued == [(f"lumber_downstream_{job}_{topic}",)]
