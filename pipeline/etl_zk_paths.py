"""The load jobs' ZooKeeper layout: the one place that names the ETL znodes.

::

    /etl/jobs/<job>/lock/          kazoo Lock recipe: one ephemeral sequential contender node per waiting or
                                   running load of <job>; the lowest holds the lock. A contender's data is
                                   its identifier: "<host> pid <pid> run <run_id>".

The paths are relative to the chroot of ``[zookeeper] connect``. The brokers' and consumer groups' znodes
are laid out in :mod:`broker.cluster.zk_paths`; the schema registry's below ``/schema_registry``.
"""

from __future__ import annotations

ETL_ROOT = "/etl"
JOBS = f"{ETL_ROOT}/jobs"


def job_path(job: str) -> str:
    """The znode of a load job (its name is already validated by ``[load] job``)."""
    if not job or "/" in job:
        raise ValueError(f"not a job name: {job!r}")
    return f"{JOBS}/{job}"


def job_lock_path(job: str) -> str:
    """The kazoo Lock of a load job: one run at a time."""
    return f"{job_path(job)}/lock"
