"""Example Airflow DAG: Lumber's hourly load, then each topic's hour as an Airflow Asset once it is complete.

Airflow is not a Lumber dependency: copy this file (and ``airflow_downstream_example.py``) into Airflow's
``dags/`` folder and set the variables below (nothing in Lumber imports it; ``make test`` type-checks it
without Airflow, and ``tests/jobs/test_airflow_dag_example.py`` runs it with ``airflow dags test`` from
``make airflow``'s ``.airflow-venv``, Airflow 3). Per hour ``H`` (the data interval ``[H, H+1)``):

* ``grace_period``: ``TimeDeltaSensor`` waits until ``H+1 + LUMBER_GRACE_MINUTES`` (``reschedule`` mode
  frees the worker slot while it waits);
* ``load``: ``lumber etl run --until-hour H+1``: every record before ``H+1`` not loaded yet, committed
  atomically with its offsets (``lumber etl run`` packs Lumber's code and runs ``spark-submit`` itself).
  Retried with backoff, also on exit code 3 (another run of the job holds its ZooKeeper lock): two loads
  of one job never run at once, whoever starts them, and a repeated run never loses or duplicates a row;
* ``complete_<topic>``, one per topic: ``lumber etl wait --topic T --hour H --json`` returns once the load
  wrote the hour's ``_SUCCESS`` (the audit proved it complete: :mod:`pipeline.completeness_publisher`), and
  the task then emits the topic's Asset (``outlets``) with the marker as the event's ``extra`` (hour,
  counts, manifest). A DAG scheduled on the Asset runs once per complete hour
  (``airflow_downstream_example.py``). An hour that is not complete within ``LUMBER_WAIT`` fails the task.

``schedule`` is :class:`CronDataIntervalTimetable` (``@hourly`` with data intervals: Airflow 3's plain
``"@hourly"`` has none), ``catchup=True`` creates missed runs after downtime and ``max_active_runs=1`` runs
them oldest first.

Settings (environment of the DAG processor and workers):

=========================== ================================================================================
``LUMBER_HOME``              Lumber's checkout with its ``.venv`` (default ``/opt/lumber``)
``LUMBER_CONFIG``            the cluster's ``lumber.toml`` (default ``/etc/lumber/lumber.toml``): ZooKeeper,
                             the ``hdfs://`` warehouse, the registry, ``[load] job``
``LUMBER_JOB``               ``[load] job`` of that file (default ``hourly``): the DAG ``lumber_load_<job>``
``LUMBER_TOPICS``            the topics whose hours become Assets, comma-separated (default ``page_view``)
``LUMBER_SPARK_MASTER``      ``--master`` of the load (default ``yarn``)
``LUMBER_GRACE_MINUTES``     wait after the hour before loading (default 10)
``LUMBER_WAIT``              how long ``complete_<topic>`` waits for the marker (default ``30m``)
=========================== ================================================================================

An Asset's URI is ``lumber://<job>/<topic>``: one Asset per topic, each event one hour of it (the hour is in
the event's ``extra``), as Airflow wants Assets declared when the DAG is parsed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from typing import Any

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.sensors.time_delta import TimeDeltaSensor
    from airflow.sdk import DAG, Asset, task
    from airflow.timetables.interval import CronDataIntervalTimetable
except ImportError:  # Airflow 2.10
    from airflow import DAG
    from airflow.datasets import Dataset as Asset
    from airflow.decorators import task
    from airflow.operators.bash import BashOperator
    from airflow.sensors.time_delta import TimeDeltaSensor
    from airflow.timetables.interval import CronDataIntervalTimetable

LUMBER_HOME = os.environ.get("LUMBER_HOME", "/opt/lumber")
LUMBER_CONFIG = os.environ.get("LUMBER_CONFIG", "/etc/lumber/lumber.toml")
JOB = os.environ.get("LUMBER_JOB", "hourly")
TOPICS = [t.strip() for t in os.environ.get("LUMBER_TOPICS", "page_view").split(",") if t.strip()]
SPARK_MASTER = os.environ.get("LUMBER_SPARK_MASTER", "yarn")
GRACE = dt.timedelta(minutes=int(os.environ.get("LUMBER_GRACE_MINUTES", "10")))
WAIT = os.environ.get("LUMBER_WAIT", "30m")

LUMBER = f"{LUMBER_HOME}/.venv/bin/lumber"
#: the hour of the run (UTC), as ``--hour`` and ``--until-hour`` take it
HOUR = "{{ data_interval_start.in_timezone('UTC').strftime('%Y-%m-%dT%H') }}"
UNTIL_HOUR = "{{ data_interval_end.in_timezone('UTC').strftime('%Y-%m-%dT%H') }}"


def topic_asset(job: str, topic: str) -> Asset:
    """The Asset of one topic's complete hours (also what a downstream DAG schedules on)."""
    return Asset(uri=f"lumber://{job}/{topic}", name=f"lumber_{job}_{topic}")


def wait_for_hour(topic: str, hour: str, **context: Any) -> dict[str, Any]:
    """``lumber etl wait`` for the hour; its marker becomes the Asset event's ``extra``."""
    done = subprocess.run(
        [
            *(LUMBER, "--config", LUMBER_CONFIG, "etl", "wait", "--topic", topic, "--hour", hour),
            *("--timeout", WAIT, "--json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        why = f"exit {done.returncode}: {done.stderr.strip()}"
        raise RuntimeError(f"lumber etl wait --topic {topic} --hour {hour}: {why}")
    marker: dict[str, Any] = json.loads(done.stdout)
    context["outlet_events"][topic_asset(JOB, topic)].extra = marker
    return marker


with DAG(
    dag_id=f"lumber_load_{JOB}",
    description="Lumber: load the hour into Parquet, then each topic's hour as an Asset once complete",
    schedule=CronDataIntervalTimetable("@hourly", timezone="UTC"),
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=True,
    max_active_runs=1,
    default_args={
        "retries": 6,
        "retry_delay": dt.timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": dt.timedelta(minutes=30),
    },
    tags=["lumber"],
) as dag:
    grace = TimeDeltaSensor(task_id="grace_period", delta=GRACE, mode="reschedule", poke_interval=60)
    load = BashOperator(
        task_id="load",
        bash_command=(
            f"{LUMBER} --config {LUMBER_CONFIG} etl run --until-hour {UNTIL_HOUR} --master '{SPARK_MASTER}'"
        ),
        execution_timeout=dt.timedelta(hours=1),
    )
    grace >> load
    for name in TOPICS:
        emit = task(task_id=f"complete_{name}", outlets=[topic_asset(JOB, name)], retries=0)
        complete = emit(wait_for_hour)(topic=name, hour=HOUR)
        load >> complete
