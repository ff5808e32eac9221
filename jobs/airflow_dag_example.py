"""Example Airflow DAG: Lumber's hourly load, one ``spark-submit`` per hour, 10 minutes after the hour ends.

Airflow is not a Lumber dependency: copy this file into Airflow's ``dags/`` folder and adapt the constants
below (nothing in Lumber imports it; ``make test`` type-checks it without Airflow installed). It does what
``lumber etl schedule --every 1h --delay 10m`` does, with Airflow's machinery:

* ``schedule="@hourly"``, ``catchup=True``: one DAG run per hour, its data interval ``[H-1, H)``; after
  downtime Airflow creates the missed runs, and ``max_active_runs=1`` runs them one at a time, oldest first;
* ``TimeDeltaSensor(delta=10 min)`` waits until ``data_interval_end + 10 min``: the grace period
  (``--delay 10m``). Its ``reschedule`` mode frees the worker slot while it waits;
* the load task is the exact command of ``lumber etl run --print-command`` with ``--until-hour`` set to the
  data interval's end: every record before ``H`` not loaded yet, committed atomically with its offsets;
* ``retries`` with ``retry_exponential_backoff``: a failed run is retried; so is exit code 3 (another run of
  the job holds its ZooKeeper lock, e.g. someone's manual ``lumber etl run``): two loads of one job never run
  at once, whoever starts them. A retried or repeated run never loses or duplicates a row.

Deploying (on the machine or image that runs the Airflow workers):

1. Lumber's code and a virtualenv with its dependencies at ``LUMBER_HOME`` (the same Python path on every
   Spark node if the executors are remote: ``[spark] python``);
2. ``$LUMBER_HOME/.venv/bin/lumber etl package --output $LUMBER_HOME/lumber-code.zip`` after each deploy:
   the ``--py-files`` zip that carries Lumber's packages to the executors;
3. the cluster's ``lumber.toml`` at ``LUMBER_CONFIG`` (ZooKeeper connect string, ``hdfs://`` warehouse,
   registry URL, ``[load] job``); ``--master`` below overrides ``[spark] master``.
"""

from __future__ import annotations

import datetime as dt

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.sensors.time_delta import TimeDeltaSensor
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.4+
    from airflow import DAG
    from airflow.operators.bash import BashOperator
    from airflow.sensors.time_delta import TimeDeltaSensor

LUMBER_HOME = "/opt/lumber"
LUMBER_CONFIG = "/etc/lumber/lumber.toml"
SPARK_MASTER = "yarn"  # or "spark://spark-master:7077"
JOB = "hourly"  # [load] job of LUMBER_CONFIG: the DAG's name follows it
GRACE = dt.timedelta(minutes=10)

PYTHON = f"{LUMBER_HOME}/.venv/bin/python"
#: ``lumber etl run --print-command``, with the hour templated (UTC, as --until-hour wants it)
LOAD_COMMAND = " ".join(
    [
        f"{LUMBER_HOME}/.venv/bin/spark-submit",
        f"--master {SPARK_MASTER}",
        "--deploy-mode client",
        f"--name lumber-load-{JOB}",
        f"--conf spark.pyspark.python={PYTHON}",
        f"--conf spark.pyspark.driver.python={PYTHON}",
        "--conf spark.sql.session.timeZone=UTC",
        f"--py-files {LUMBER_HOME}/lumber-code.zip",
        f"{LUMBER_HOME}/jobs/load.py",
        f"--config {LUMBER_CONFIG}",
        "--until-hour {{ data_interval_end.in_timezone('UTC').strftime('%Y-%m-%dT%H') }}",
    ]
)

with DAG(
    dag_id=f"lumber_load_{JOB}",
    description="Lumber: load the hour's Kafka-style topics into Parquet (one atomic commit per run)",
    schedule="@hourly",
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
        bash_command=LOAD_COMMAND,
        env={"PYSPARK_PYTHON": PYTHON, "PYSPARK_DRIVER_PYTHON": PYTHON},
        append_env=True,
        execution_timeout=dt.timedelta(hours=1),
    )
    grace >> load
