"""Example downstream Airflow DAG: runs once per complete hour of a topic that Lumber loaded.

It is scheduled on the topic's Asset (``lumber://<job>/<topic>``), which ``airflow_dag_example.py`` emits
when ``lumber etl wait`` has seen the hour's ``_SUCCESS`` marker; the triggering event's ``extra`` is that
marker (hour, counts, the manifest that completed it), so the job reads exactly the hour's folder
``<warehouse>/<topic>/dt=YYYY-MM-DD/hr=HH/`` knowing it is whole: no guessing with a delay. Settings are
the example DAG's (``LUMBER_JOB``, ``LUMBER_TOPICS``: the first topic here).

A late record that reopens a marked hour replaces its ``_SUCCESS`` by ``_INCOMPLETE``; once the hour is
complete again the load writes a ``_SUCCESS`` with a higher ``revision`` and the example DAG, rerun for the
hour, emits the Asset again: the downstream run recomputes the hour.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

try:  # Airflow 3
    from airflow.sdk import DAG, Asset, task
except ImportError:  # Airflow 2.10
    from airflow import DAG
    from airflow.datasets import Dataset as Asset
    from airflow.decorators import task

JOB = os.environ.get("LUMBER_JOB", "hourly")
TOPIC = os.environ.get("LUMBER_TOPICS", "page_view").split(",")[0].strip()
ASSET = Asset(uri=f"lumber://{JOB}/{TOPIC}", name=f"lumber_{JOB}_{TOPIC}")


def report_hours(**context: Any) -> list[dict[str, Any]]:
    """The hours this run was triggered for, from the Asset events' markers."""
    hours = []
    for event in context["triggering_asset_events"][ASSET]:
        marker = dict(event.extra or {})
        hours.append(marker)
        print(
            f"{marker.get('topic')} hour {marker.get('hour')} complete: {marker.get('loaded')} rows, "
            f"{marker.get('quarantined')} quarantined, manifest {marker.get('manifest_sequence')}"
        )
    return hours


with DAG(
    dag_id=f"lumber_downstream_{JOB}_{TOPIC}",
    description="Example: one run per complete hour of a Lumber topic (scheduled on its Asset)",
    schedule=[ASSET],
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["lumber"],
) as dag:
    task(task_id="read_hour")(report_hours)()
