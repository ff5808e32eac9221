"""One run of the hourly load: lock -> recover -> plan -> persist the plan -> read -> stage -> commit.

:func:`run_load` is what ``jobs/load.py`` calls with the SparkSession it built (this module never builds
or configures one). In order:

1. take the job's ZooKeeper lock (:class:`~pipeline.job_lock.JobLock`); another run holding it ends this
   one at once with :class:`~pipeline.load_errors.JobLockedError` naming the holder;
2. recover what a crashed run left (:meth:`~pipeline.commit.CommitProtocol.recover`), then record this run
   as ``running``;
3. plan (:func:`~pipeline.load_plan.make_plan`): committed offsets from the latest manifest, log offsets
   from the brokers, reader schemas from the registry; persist the plan;
4. read with Spark (:func:`~pipeline.staging.stage`): each task fetches, decodes and writes its own Parquet
   files into the folder of its attempt and returns a summary; one attempt per task is kept;
5. commit (:meth:`~pipeline.commit.CommitProtocol.commit`): the manifest with the new offsets, the counts
   and the file moves, published at one atomic rename while the lock is still held; then the moves;
6. record the outcome: ``committed``, ``nothing_to_load`` (no new records and no offset to move: no manifest),
   or ``failed`` with the error (a crash leaves ``running``, which the next run's recovery turns into
   ``crashed``);
7. publish the audit counts of every committed manifest not published yet to the audit topic
   (:func:`~pipeline.load_audit_publisher.publish_load_counts`: this run's, and those of a crashed run that
   recovery rolled forward); a failure there is reported and left to the next run;
8. decide the completeness of the hours and publish their markers and events
   (:func:`~pipeline.completeness_publisher.publish_completeness`: after step 7, so that the audit it reads
   holds this run's counts; a failure there is reported and left to the next run);
9. with ``[load] metrics_textfile``, write the run's figures (records, rows, quarantined, lost, bytes, lag
   left behind, seconds per phase: :mod:`pipeline.load_metrics`) for node_exporter's textfile collector,
   whatever the outcome; the run's record keeps them too (``extra.figures``).

A run whose plan has no records but moves offsets (a new partition under ``start = latest``, a gap skipped
under ``on_out_of_range = earliest``) still commits a manifest, without files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster.zookeeper_auth import new_zookeeper_client
from pipeline.commit import CommitProtocol, RecoveryReport
from pipeline.completeness_publisher import publish_completeness
from pipeline.faults import Faults
from pipeline.fs import open_filesystem
from pipeline.job_lock import JobLock, contender_identifier
from pipeline.load_audit_publisher import publish_load_counts
from pipeline.load_config import LoadConfig
from pipeline.load_errors import LoadError
from pipeline.load_metrics import LoadFigures, write_textfile
from pipeline.load_plan import ClusterView, LoadPlan, make_plan
from pipeline.load_sections import LoadSections
from pipeline.manifest import Manifest
from pipeline.run_record import RunRecord
from pipeline.source import SourceSettings
from pipeline.spark_progress import SparkProgress
from pipeline.staging import range_results, stage, staged_files, window_counts
from pipeline.task_output import ParquetSettings
from schemas.client import SchemaRegistryClient

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_run_id(now_ms: int) -> str:
    """``<UTC time>-<6 hex>``: sorts by start time, unique."""
    moment = dt.datetime.fromtimestamp(now_ms / 1000, tz=dt.UTC)
    return f"{moment.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def parse_until_hour(text: str) -> int:
    """``--until-hour``: ``YYYY-MM-DDTHH`` (UTC) as ms since the epoch: load records before that hour."""
    for layout in ("%Y-%m-%dT%H", "%Y-%m-%d %H", "%Y-%m-%dT%H:00", "%Y-%m-%dT%H:00:00"):
        try:
            moment = dt.datetime.strptime(text, layout).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
        return int(moment.timestamp()) * 1000
    raise LoadError(f"--until-hour {text!r}: expected an hour as YYYY-MM-DDTHH (UTC), e.g. 2026-11-22T10")


@dataclass(frozen=True)
class RunOutcome:
    """What a run did."""

    record: RunRecord
    recovery: RecoveryReport
    plan: LoadPlan | None = None
    manifest: Manifest | None = None
    figures: LoadFigures | None = None


def source_settings(config: LoadSections, faults: Faults) -> SourceSettings:
    load = config.load
    return SourceSettings(
        # the tasks' secrets travel inside their pickled settings, read here on the driver (a task may run
        # where the password's file or variable is not): never in Spark's conf nor on a command line. The
        # registry's Basic password as the brokers' SASL password
        registry=config.registry.with_secrets_read(),
        bootstrap_servers=tuple(load.bootstrap_servers),
        zookeeper_connect=config.zookeeper.connect,
        consumer=config.consumer.replace(**load.security_settings()).with_secrets_read("load"),
        arrow_batch_records=load.arrow_batch_records,
        faults=faults,
    )


def parquet_settings(load: LoadConfig) -> ParquetSettings:
    return ParquetSettings(
        compression=load.parquet_compression,
        row_group_rows=load.parquet_row_group_rows,
        target_file_bytes=load.target_file_bytes,
    )


def _zookeeper(config: LoadSections) -> KazooClient:
    zk = config.zookeeper
    client = new_zookeeper_client(hosts=zk.connect, timeout=zk.session_timeout_ms / 1000)
    try:
        client.start(timeout=zk.connect_timeout_ms / 1000)
    except KazooTimeoutError as exc:
        client.close()
        raise LoadError(f"cannot reach ZooKeeper at {zk.connect} for the job lock: {exc}") from exc
    return client


def run_load(
    spark: Any,
    config: LoadSections,
    *,
    topics: Sequence[str] | None = None,
    cutoff_ms: int | None = None,
    progress: Progress = log.info,
    clock_ms: Callable[[], int] = _now_ms,
) -> RunOutcome:
    """Run the load once (see the module docstring). Raises :class:`LoadError` subclasses on failure."""
    load = config.load
    faults = Faults.parse(load.fault_injection)
    fs = open_filesystem(load.warehouse_url, webhdfs_url=load.webhdfs_url, hdfs_client=load.hdfs_client)
    protocol = CommitProtocol(fs, load.job, faults=faults, clock_ms=clock_ms)
    run_id = new_run_id(clock_ms())
    zk = _zookeeper(config)
    seconds: dict[str, float] = {}
    try:
        with JobLock(
            zk, load.job, contender_identifier(run_id), timeout_s=load.lock_timeout_ms / 1000
        ) as lock:
            progress(f"run {run_id} of job {load.job!r}: lock {lock.path} taken; warehouse {fs.root}")
            started_s = time.monotonic()
            recovery = protocol.recover()
            seconds["recover"] = time.monotonic() - started_s
            if recovery.did_anything:
                progress(
                    f"recovered: rolled forward manifests {list(recovery.rolled_forward)} "
                    f"({recovery.moved_files} files moved), discarded staging of "
                    f"{len(recovery.discarded_staging)} runs, marked {recovery.crashed_run or 'no run'} "
                    "crashed"
                )
            record = RunRecord(
                run_id, load.job, "running", clock_ms(), host=socket.gethostname(), pid=os.getpid()
            )
            protocol.start_run(record)
            try:
                outcome = _run(
                    spark,
                    config,
                    protocol,
                    lock,
                    run_id,
                    topics,
                    cutoff_ms,
                    faults,
                    progress,
                    clock_ms,
                    seconds,
                )
            except BaseException as exc:
                figures = LoadFigures(load.job, "failed", clock_ms(), seconds=dict(seconds))
                failed = dataclasses.replace(
                    record,
                    outcome="failed",
                    finished_at_ms=figures.finished_at_ms,
                    error=f"{type(exc).__name__}: {exc}",
                    extra={"figures": figures.to_json()},
                )
                try:
                    protocol.write_run(failed)
                except Exception:
                    log.exception("could not record the failure of run %s", run_id)
                _write_figures(load, figures)
                raise
            publish_load_counts(protocol, config, progress)
            completeness = publish_completeness(protocol, config, progress, now_ms=clock_ms(), faults=faults)
            ran = outcome.figures
            if ran is not None and completeness.overdue:
                ran = dataclasses.replace(ran, overdue_hours=len(completeness.overdue))
                progress(f"completeness: overdue hours: {', '.join(completeness.overdue[:10])}")
            _write_figures(load, ran)
            return dataclasses.replace(outcome, recovery=recovery, figures=ran)
    finally:
        zk.stop()
        zk.close()


def _run(
    spark: Any,
    config: LoadSections,
    protocol: CommitProtocol,
    lock: JobLock,
    run_id: str,
    topics: Sequence[str] | None,
    cutoff_ms: int | None,
    faults: Faults,
    progress: Progress,
    clock_ms: Callable[[], int],
    seconds: dict[str, float],
) -> RunOutcome:
    """Steps 3 to 6 (see the module docstring); ``seconds`` gets each phase's time as it ends."""
    load = config.load
    started_s = time.monotonic()
    started = protocol.read_run(run_id)
    if started is None:
        raise LoadError(f"run {run_id}: its run record vanished")
    base = protocol.latest_manifest()
    committed = dict(base.offsets) if base is not None else {}
    base_sequence = base.sequence if base is not None else 0
    settings = source_settings(config, faults)
    cluster = ClusterView(
        config.consumer.replace(**load.security_settings()), load.bootstrap_servers, config.zookeeper.connect
    )
    registry = SchemaRegistryClient.from_config(config.registry, url=load.registry_url or None)
    try:
        plan = make_plan(
            load=load,
            cluster=cluster,
            registry=registry,
            committed=committed,
            run_id=run_id,
            base_sequence=base_sequence,
            planned_at_ms=clock_ms(),
            cutoff_ms=cutoff_ms,
            topics=topics,
        )
    finally:
        cluster.close()
        registry.close()
    protocol.persist_plan(run_id, plan.to_json())
    seconds["plan"] = time.monotonic() - started_s
    progress(
        f"planned: {len(plan.ranges)} ranges, {plan.record_count} records, {len(plan.tasks)} tasks"
        + (
            f", {sum(loss.record_count for loss in plan.losses)} records lost to retention"
            if plan.losses
            else ""
        )
    )
    lost = sum(loss.record_count for loss in plan.losses)
    if not plan.tasks and dict(plan.next_offsets) == committed and not plan.losses:
        figures = _figures(load.job, "nothing_to_load", clock_ms(), plan, None, seconds)
        record = dataclasses.replace(
            started,
            outcome="nothing_to_load",
            finished_at_ms=figures.finished_at_ms,
            extra={"figures": figures.to_json()},
        )
        protocol.write_run(record)
        progress("nothing to load")
        return RunOutcome(record, RecoveryReport(), plan, figures=figures)
    started_s = time.monotonic()
    with SparkProgress(spark, progress):
        chosen = stage(
            spark,
            plan,
            protocol.layout,
            settings,
            warehouse_url=load.warehouse_url,
            webhdfs_url=load.webhdfs_url,
            hdfs_client=load.hdfs_client,
            window_ms=load.window_ms,
            parquet=parquet_settings(load),
            progress=progress,
        )
    seconds["stage"] = time.monotonic() - started_s
    files = protocol.name_files(run_id, staged_files(plan, chosen))
    manifest = Manifest(
        job=load.job,
        sequence=base_sequence + 1,
        run_id=run_id,
        committed_at_ms=clock_ms(),
        window_ms=load.window_ms,
        offsets=dict(plan.next_offsets),
        ranges=range_results(plan, chosen),
        counts=window_counts(plan, chosen),
        losses=plan.losses,
        files=tuple(files),
        staging=protocol.layout.staging_rel(run_id),
        cutoff_ms=cutoff_ms,
    )
    progress(f"staged: {manifest.rows} rows, {manifest.quarantined} quarantined, {len(files)} files")
    faults.after("staged")
    started_s = time.monotonic()
    protocol.commit(manifest, check_still_allowed=lock.ensure_held)
    seconds["commit"] = time.monotonic() - started_s
    figures = _figures(load.job, "committed", clock_ms(), plan, manifest, seconds)
    record = dataclasses.replace(
        started,
        outcome="committed",
        finished_at_ms=figures.finished_at_ms,
        sequence=manifest.sequence,
        ranges=len(plan.ranges),
        rows=manifest.rows,
        quarantined=manifest.quarantined,
        lost=lost,
        extra={"figures": figures.to_json()},
    )
    protocol.write_run(record)
    progress(
        f"committed manifest {manifest.sequence}: {manifest.rows} rows, {manifest.quarantined} quarantined, "
        f"{len(files)} files"
    )
    return RunOutcome(record, RecoveryReport(), plan, manifest, figures)


def _figures(
    job: str,
    outcome: str,
    finished_at_ms: int,
    plan: LoadPlan,
    manifest: Manifest | None,
    seconds: dict[str, float],
) -> LoadFigures:
    """A run's figures; the lag left behind is what the logs hold past the plan's next offsets (records
    held back by ``max_records_per_partition`` or the cutoff)."""
    lag = sum(
        max(p.high_watermark - plan.next_offsets.get(p.topic_partition, p.high_watermark), 0)
        for p in plan.partitions
    )
    return LoadFigures(
        job,
        outcome,
        finished_at_ms,
        records=plan.record_count,
        rows=0 if manifest is None else manifest.rows,
        quarantined=0 if manifest is None else manifest.quarantined,
        lost=sum(loss.record_count for loss in plan.losses),
        bytes=0 if manifest is None else sum(f.bytes or 0 for f in manifest.files),
        lag=lag,
        seconds=dict(seconds),
    )


def _write_figures(load: LoadConfig, figures: LoadFigures | None) -> None:
    """Step 9: the figures to ``[load] metrics_textfile``, if set (a failure to write is logged: the run's
    outcome stands)."""
    if not load.metrics_textfile or figures is None:
        return
    try:
        write_textfile(load.metrics_textfile, figures)
    except OSError:
        log.exception("could not write the load's metrics to %s", load.metrics_textfile)
