"""After each load run: decide the closed hours, write their markers, publish their events.

:meth:`CompletenessPublisher.publish` is what :func:`pipeline.load_job.run_load` calls at the end of every
run (committed, or nothing to load: hours close as time passes), under the job's lock, after the run's
audit counts are published (:mod:`pipeline.load_audit_publisher`), so that the reconciliation it reads
holds this run's counts:

1. if the load's counts of some committed manifest are not in the audit topic yet (``AUDIT_PUBLISHED``
   behind the latest manifest), nothing is decided: the next run does it. The marker therefore follows the
   committed manifest, never precedes it; a run killed between its commit and its markers leaves the hours
   unmarked, and the next run, deciding from the same committed state, marks them;
2. :meth:`CompletenessPublisher.decide`: the topics the job loads (the latest manifest's), the audit topic
   read whole (:func:`audit.audit_reader.read_audit_events`), reconciled per topic in hour-wide windows
   for the hours that ended in the last ``lookback_ms``, plus, for ``require = "watermark"`` topics, each
   partition's committed offset against the brokers' offset for ``hour end + grace``
   (:func:`pipeline.completeness.decide_hour`); the audit topic is read again until it shows the latest
   manifest's load-tier events (a broker exposing only flushed messages shows them a moment after it
   confirmed them). Each hour's markers are read (a marker that is not this
   job's is reported and the hour left alone: :class:`~pipeline.completeness_marker.ForeignMarkerError`);
3. the markers change where the decision differs from the disk
   (:class:`~pipeline.completeness_marker.MarkerStore`): COMPLETE and no ``_SUCCESS`` with these counts ->
   a new ``_SUCCESS`` (revision + 1); LATE and a ``_SUCCESS`` there -> ``_INCOMPLETE`` replaces it.
   OPEN and INCOMPLETE hours that were never marked change nothing;
4. every marker written in step 3, and every marker on disk decided after the time in
   ``_lumber/<job>/COMPLETENESS_PUBLISHED`` (a pass that died before its events were confirmed), is sent to
   ``[completeness] topic`` (key ``topic/YYYY-MM-DDTHH``, value the marker's JSON, ``acks = all``), then
   the pointer moves to this pass's time. Events are at least once; a consumer keeps the highest
   ``revision`` per key.

Publishing never fails a run: an error is reported through ``progress`` and the next run decides again.
Not thread-safe: one pass per run, under the job's lock; :meth:`decide` alone (``lumber etl completeness``,
``lumber etl wait``) reads only and may run anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from audit.audit_report import AuditReport, reconcile
from audit.errors import AuditError
from pipeline.commit import CommitProtocol
from pipeline.completeness import (
    HourCompleteness,
    PartitionWatermark,
    decide_hour,
    hosts_missing,
    loaded_by_host,
)
from pipeline.completeness_config import CompletenessPolicy
from pipeline.completeness_marker import (
    HOUR_MS,
    CompletenessMarker,
    ForeignMarkerError,
    HourMarkers,
    MarkerState,
    MarkerStore,
    hour_text,
)
from pipeline.faults import Faults
from pipeline.fs import join
from pipeline.load_audit_publisher import LoadAuditPublisher
from pipeline.load_errors import CommitError, InjectedFault, LoadError
from pipeline.load_sections import LoadSections
from pipeline.manifest import Manifest

if TYPE_CHECKING:
    from audit.audit_reader import AuditRead

log = logging.getLogger(__name__)

POINTER_NAME = "COMPLETENESS_PUBLISHED"


class CompletenessError(LoadError):
    """A question about completeness that cannot be answered: a topic the job does not load, an hour in
    the future, a cluster that cannot be read."""


@dataclass(frozen=True)
class Decisions:
    """What :meth:`CompletenessPublisher.decide` found: every hour decided, and the hours left alone."""

    hours: tuple[HourCompleteness, ...]
    markers: dict[tuple[str, int], HourMarkers] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PassReport:
    """What one pass of :meth:`CompletenessPublisher.publish` did."""

    marked: tuple[str, ...] = ()
    revoked: tuple[str, ...] = ()
    events: int = 0
    errors: tuple[str, ...] = ()
    skipped: str | None = None
    overdue: tuple[str, ...] = ()


class CompletenessPublisher:
    """Decides and publishes one job's completeness (see the module docstring)."""

    def __init__(
        self, protocol: CommitProtocol, config: LoadSections, *, faults: Faults | None = None
    ) -> None:
        self.protocol = protocol
        self.config = config
        self.settings = config.completeness
        self.faults = faults or Faults()
        self.store = MarkerStore(protocol.fs, protocol.layout.warehouse, protocol.layout.job)
        self._watermark_consumers: list[Any] = []

    @property
    def pointer(self) -> str:
        return join(self.protocol.layout.meta, POINTER_NAME)

    def published_at_ms(self) -> int:
        fs = self.protocol.fs
        if not fs.exists(self.pointer):
            return 0
        try:
            return int(json.loads(fs.read_text(self.pointer))["decided_at_ms"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CommitError(f"{self.pointer}: not a valid completeness pointer: {exc}") from exc

    # ------------------------------------------------------------------------------ deciding

    def loaded_topics(self) -> dict[str, dict[int, int]]:
        """``{topic: {partition: committed offset}}`` of the latest manifest."""
        manifest = self.protocol.latest_manifest()
        found: dict[str, dict[int, int]] = {}
        for tp, offset in (manifest.offsets if manifest is not None else {}).items():
            found.setdefault(tp.topic, {})[tp.partition] = offset
        return found

    def decide(
        self,
        *,
        now_ms: int,
        topics: Sequence[str] = (),
        since_ms: int | None = None,
        hour_ms: int | None = None,
    ) -> Decisions:
        """Every hour of ``topics`` (all the job loads when empty) that started in ``[since_ms, now)``
        (default: the last ``lookback_ms``), or only the hour starting at ``hour_ms``."""
        loaded = self.loaded_topics()
        for topic in topics:
            if topic not in loaded:
                raise CompletenessError(
                    f"topic {topic!r} is not loaded by job {self.protocol.layout.job!r} (it loads: "
                    f"{', '.join(sorted(loaded)) or 'nothing yet'})"
                )
        if hour_ms is not None and hour_ms >= now_ms:
            raise CompletenessError(
                f"hour {hour_text(hour_ms)} has not begun yet (now {hour_text(now_ms - now_ms % HOUR_MS)}:MM "
                "UTC): there is nothing to decide"
            )
        wanted = sorted(topics) if topics else sorted(loaded)
        if not wanted:
            return Decisions((), notes=("the job has committed nothing yet",))
        since = since_ms if since_ms is not None else now_ms - self.settings.lookback_ms
        since -= since % HOUR_MS
        if hour_ms is not None:
            since = hour_ms - hour_ms % HOUR_MS
        if since >= now_ms:
            raise CompletenessError(
                f"--since {hour_text(since)} is in the future (now "
                f"{hour_text(now_ms - now_ms % HOUR_MS)}:MM UTC)"
            )
        until = since + HOUR_MS if hour_ms is not None else now_ms - now_ms % HOUR_MS + HOUR_MS
        read = self._read_audit_covering(self.protocol.latest_manifest())
        hours: list[HourCompleteness] = []
        markers: dict[tuple[str, int], HourMarkers] = {}
        errors: list[str] = []
        notes: list[str] = []
        try:
            for topic in wanted:
                policy = self.settings.policy(topic)
                report = self._reconcile(read, topic, since, until, now_ms, policy)
                notes += report.notes
                windows = {w.window_start_ms: w for w in report.windows_of(topic)}
                starts = sorted(windows) if hour_ms is None else [since]
                watermark_of: Callable[[int], tuple[PartitionWatermark, ...]] = lambda _start: ()  # noqa: E731
                if policy.require == "watermark":
                    watermark_of = self._watermarks(topic, loaded[topic], policy.grace_ms)
                for start in starts:
                    try:
                        found = self.store.read(topic, start)
                    except ForeignMarkerError as exc:
                        errors.append(str(exc))
                        continue
                    markers[(topic, start)] = found
                    decided = decide_hour(
                        topic,
                        start,
                        policy=policy,
                        now_ms=now_ms,
                        window=windows.get(start),
                        markers=found,
                        watermarks=watermark_of(start),
                        alert_after_ms=self.settings.alert_after_ms,
                    )
                    window = windows.get(start)
                    if decided.state in ("INCOMPLETE", "LATE") and decided.missing > 0 and window is not None:
                        by_host = loaded_by_host(self.protocol.fs, self.store.warehouse, topic, start)
                        decided = _with_hosts(decided, hosts_missing(window.hosts, by_host))
                    hours.append(decided)
        finally:
            self._close_consumers()
        return Decisions(tuple(hours), markers, tuple(errors), tuple(dict.fromkeys(notes)))

    def _read_audit_covering(self, manifest: Manifest | None) -> AuditRead:
        """The audit topic, read again (every 200 ms, for up to 10 s) until it shows the load-tier events
        of ``manifest`` when it has counts: published and confirmed is not yet readable on a broker that
        exposes only flushed messages, or before a follower caught up (raises :class:`CompletenessError`
        when it never does: the next run decides)."""
        job = self.protocol.layout.job
        deadline = time.monotonic() + 10
        while True:
            read = self._read_audit()
            if manifest is None or not manifest.counts:
                return read
            if any(
                e.tier == "load" and e.job == job and e.sequence == manifest.sequence for e in read.events
            ):
                return read
            if time.monotonic() > deadline:
                raise CompletenessError(
                    f"the audit topic {self.config.audit.topic} does not show the counts of manifest "
                    f"{manifest.sequence} of job {job!r} 10 s after they were published: not decided"
                )
            time.sleep(0.2)

    def _read_audit(self) -> AuditRead:
        """Every event of the audit topic (raises :class:`CompletenessError` when it cannot be read)."""
        from audit.audit_codec import AuditEventCodec  # noqa: PLC0415 - the registry client, only here
        from audit.audit_reader import read_audit_events  # noqa: PLC0415

        config = self.config
        load = config.load
        consumer = config.consumer.replace(**load.security_settings())
        if load.bootstrap_servers:
            consumer = consumer.replace(bootstrap_servers=list(load.bootstrap_servers))
        codec = AuditEventCodec.from_config(
            config.registry, config.audit.topic, url=load.registry_url or None
        )
        try:
            return read_audit_events(
                consumer,
                codec,
                topic=config.audit.topic,
                zookeeper_connect=None if load.bootstrap_servers else config.zookeeper.connect,
            )
        except AuditError as exc:
            raise CompletenessError(f"cannot decide completeness: {exc}") from exc
        finally:
            codec.close()

    def _reconcile(
        self, read: AuditRead, topic: str, since: int, until: int, now_ms: int, policy: CompletenessPolicy
    ) -> AuditReport:
        try:
            return reconcile(
                read.events,
                since_ms=since,
                until_ms=until,
                now_ms=now_ms,
                grace_ms=policy.grace_ms,
                tolerance=policy.tolerance,
                topics=[topic],
                job=self.protocol.layout.job,
                window_ms=HOUR_MS,
            )
        except AuditError as exc:
            raise CompletenessError(f"cannot decide completeness of {topic}: {exc}") from exc

    def _watermarks(
        self, topic: str, committed: dict[int, int], grace_ms: int
    ) -> Callable[[int], tuple[PartitionWatermark, ...]]:
        """For ``require = "watermark"``: per hour, each partition's committed offset, log end and the first
        offset stamped at or after the hour's end + grace (ListOffsets by time, one request per hour)."""
        from broker.client.consumer.consumer import Consumer  # noqa: PLC0415

        config = self.config
        load = config.load
        settings = config.consumer.replace(**load.security_settings())
        if load.bootstrap_servers:
            settings = settings.replace(bootstrap_servers=list(load.bootstrap_servers))
        consumer = Consumer(
            settings, zookeeper_connect=None if load.bootstrap_servers else config.zookeeper.connect
        )
        try:
            partitions = consumer.partitions_for(topic)
            ends = consumer.end_offsets(partitions)
            answers: dict[int, tuple[PartitionWatermark, ...]] = {}

            def of(start: int) -> tuple[PartitionWatermark, ...]:
                if start not in answers:
                    target = start + HOUR_MS + grace_ms
                    firsts = consumer.offsets_for_times(dict.fromkeys(partitions, target))
                    answers[start] = tuple(
                        PartitionWatermark(
                            tp.partition, committed.get(tp.partition, 0), ends[tp], firsts.get(tp)
                        )
                        for tp in sorted(partitions)
                    )
                return answers[start]

        except Exception:
            consumer.close()
            raise
        self._watermark_consumers.append(consumer)  # closed by decide() once every hour is decided
        return of

    def _close_consumers(self) -> None:
        while self._watermark_consumers:
            self._watermark_consumers.pop().close()

    # ------------------------------------------------------------------------------ publishing

    def publish(self, *, now_ms: int, progress: Callable[[str], None] = log.info) -> PassReport:
        """Steps 1 to 4 of the module docstring, under the job's lock."""
        audit_published = LoadAuditPublisher(self.protocol, self.config)
        if audit_published.pending():
            return PassReport(
                skipped=f"the audit counts of manifests {audit_published.pending()} are not published yet: "
                "hours are decided by the next run"
            )
        self.faults.after("completeness")
        decisions = self.decide(now_ms=now_ms)
        published_at = self.published_at_ms()
        job = self.protocol.layout.job
        outgoing: list[CompletenessMarker] = []
        marked: list[str] = []
        revoked: list[str] = []
        errors = list(decisions.errors)
        write_failed = False
        for decided in decisions.hours:
            found = decisions.markers.get((decided.topic, decided.hour_start_ms), HourMarkers())
            try:
                if decided.state == "COMPLETE":
                    current = found.success
                    fresh = _marker(job, decided, "COMPLETE", found.revision + 1, now_ms)
                    if current is not None and current.same_counts(fresh) and found.incomplete is None:
                        if current.decided_at_ms > published_at:
                            outgoing.append(current)
                        continue
                    self.store.mark_complete(fresh, found)
                    outgoing.append(fresh)
                    marked.append(fresh.key)
                elif decided.state == "LATE":
                    if found.success is not None:
                        fresh = _marker(job, decided, "INCOMPLETE", found.revision + 1, now_ms)
                        self.store.mark_incomplete(fresh, found)
                        outgoing.append(fresh)
                        revoked.append(fresh.key)
                    elif found.incomplete is not None and found.incomplete.decided_at_ms > published_at:
                        outgoing.append(found.incomplete)
            except LoadError as exc:
                errors.append(f"{decided.topic} hour {decided.hour}: {exc}")
                write_failed = True
        sent = self._send(outgoing) if outgoing else 0
        # every marker on disk is in the topic now, unless a write failed half way (its hour's marker may
        # be on disk and not sent): then the pointer stays, and the next pass sends what is newer
        if not write_failed:
            self.protocol.fs.write_text(
                self.pointer, json.dumps({"decided_at_ms": now_ms}) + "\n", overwrite=True
            )
        for key in marked:
            progress(f"completeness: {key} is complete: _SUCCESS written")
        for key in revoked:
            progress(f"completeness: {key} is no longer complete: _SUCCESS replaced by _INCOMPLETE")
        for error in errors:
            progress(f"completeness: {error}")
        overdue = tuple(f"{h.topic}/{h.hour} ({h.reason})" for h in decisions.hours if h.overdue)
        return PassReport(tuple(marked), tuple(revoked), sent, tuple(errors), None, overdue)

    def _send(self, markers: Sequence[CompletenessMarker]) -> int:
        """Each marker to ``[completeness] topic``, waiting for every confirmation."""
        from broker.client.producer.internal_topic import ensure_producer_topic  # noqa: PLC0415
        from broker.client.producer.producer import Producer  # noqa: PLC0415

        config = self.config
        load = config.load
        servers = list(load.bootstrap_servers) or list(config.producer.bootstrap_servers)
        settings = config.producer.replace(
            **load.security_settings(),
            bootstrap_servers=servers,
            acks="all",
            audit_interval_ms=0,
            client_id=f"lumber-load-completeness-{load.job}",
        )
        with Producer(settings, zookeeper_connect=None if servers else config.zookeeper.connect) as producer:
            ensure_producer_topic(producer, self.settings.topic, self.settings.topic_partitions)
            futures = [
                producer.send(
                    self.settings.topic, m.dumps(indent=None).encode("utf-8"), key=m.key.encode("utf-8")
                )
                for m in markers
            ]
            producer.flush()
            for future in futures:
                future.result()
        return len(futures)


def _marker(
    job: str, decided: HourCompleteness, state: MarkerState, revision: int, now_ms: int
) -> CompletenessMarker:
    return CompletenessMarker(
        kind="lumber-completeness",
        job=job,
        topic=decided.topic,
        hour=decided.hour,
        hour_start_ms=decided.hour_start_ms,
        state=state,
        revision=revision,
        require="watermark" if decided.require == "watermark" else "audit",
        expected=decided.expected,
        loaded=decided.loaded,
        quarantined=decided.quarantined,
        missing=decided.missing,
        duplicate=decided.duplicate,
        manifest_sequence=decided.manifest_sequence,
        manifest_run_id=decided.manifest_run_id,
        decided_at_ms=now_ms,
        reason=decided.reason,
        hosts_missing=dict(decided.hosts_missing),
    )


def publish_completeness(
    protocol: CommitProtocol,
    config: LoadSections,
    progress: Callable[[str], None],
    *,
    now_ms: int,
    faults: Faults | None = None,
) -> PassReport:
    """What the load job calls at the end of a run: one pass; never raises but an injected fault."""
    if not config.completeness.publish:
        return PassReport(skipped="[completeness] publish is off")
    if not config.audit.publish_load_counts:
        return PassReport(skipped="[audit] publish_load_counts is off: completeness needs the load's counts")
    try:
        report = CompletenessPublisher(protocol, config, faults=faults).publish(
            now_ms=now_ms, progress=progress
        )
    except InjectedFault:
        raise
    except Exception as exc:  # the data is committed: a failure here waits for the next run
        log.debug("deciding completeness failed", exc_info=True)
        report = PassReport(errors=(f"{type(exc).__name__}: {exc}",))
        progress(f"completeness: not decided ({report.errors[0]}); the next run decides again")
    if report.skipped:
        progress(f"completeness: {report.skipped}")
    return report


def _with_hosts(decided: HourCompleteness, missing: dict[str, int]) -> HourCompleteness:
    return dataclasses.replace(decided, hosts_missing=missing)
