"""The load tier of the audit: a job's committed counts, published to the audit topic after the commit.

The counts are part of the commit itself: every manifest (:mod:`pipeline.commit`) holds the rows and
quarantined records of each (topic, partition, window) the run committed, so data, offsets and counts are
published together or not at all. Publishing them as audit events comes after, and is repeatable:

1. ``_lumber/<job>/AUDIT_PUBLISHED`` holds ``{"sequence": N}``: every manifest up to N has had its events
   confirmed by the brokers (``acks = all``). Missing means 0;
2. :meth:`LoadAuditPublisher.publish_pending` turns each manifest after N, in order, into events
   (:func:`load_events`), sends them, waits for every confirmation, then moves the pointer to that manifest;
3. the load job (:func:`publish_load_counts`) calls it at the end of every run, under the job's lock: after
   its own commit, and also when it had nothing to load, so the manifests of a run that crashed after its
   commit point (rolled forward by recovery) or whose publishing failed (brokers down) are published by the
   next run.

An event's id is derived from (job, run, topic, partition, window) (:func:`~audit.audit_event.
load_event_id`) and its content from the manifest alone (``emitted_at_ms`` is the commit time), so a crash
between sending and moving the pointer, or publishing again by hand (:meth:`publish_manifests`), repeats
identical events that readers count once.

Per manifest count (``window_ms`` of the manifest):

* ``count`` = committed rows, ``malformed_count`` = quarantined records, ``bytes`` = 0 (the manifest has no
  byte counts);
* records without a timestamp (the manifest puts them in the window starting at ``-window_ms``) become
  ``missing_timestamp_count`` in the window of the commit time.

It publishes through the audit's :class:`~audit.audit_publisher.AuditPublisher`, which first makes sure the
audit topic exists, creating it with ``[audit] topic_partitions`` partitions if it does not
(:func:`~broker.client.producer.internal_topic.ensure_topic`, as the producers' audit does): brokers create no
topic on demand by default, and a send to a missing topic would wait ``max_block_ms`` for nothing. A
cluster that refuses to create it fails the publishing at once, with the command that creates it.

Publishing never fails a run: an error is reported through ``progress`` and left for the next run.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from audit.audit_event import AuditEvent, load_event_id, window_start
from audit.audit_publisher import AuditPublisher
from pipeline.commit import CommitProtocol
from pipeline.fs import join
from pipeline.load_errors import CommitError
from pipeline.load_sections import LoadSections
from pipeline.manifest import Manifest

log = logging.getLogger(__name__)

POINTER_NAME = "AUDIT_PUBLISHED"


def load_events(manifest: Manifest, host: str) -> list[AuditEvent]:
    """The load-tier events of one committed manifest (see the module docstring)."""
    width = manifest.window_ms
    commit_window = window_start(manifest.committed_at_ms, width)
    merged: dict[tuple[str, int, int], list[int]] = {}
    for found in manifest.counts:
        if found.window_start_ms < 0:
            entry = merged.setdefault((found.topic, found.partition, commit_window), [0, 0, 0])
            entry[2] += found.rows + found.quarantined
        else:
            entry = merged.setdefault((found.topic, found.partition, found.window_start_ms), [0, 0, 0])
            entry[0] += found.rows
            entry[1] += found.quarantined
    return [
        AuditEvent(
            topic=topic,
            tier="load",
            host=host,
            window_start_ms=start,
            window_ms=width,
            count=rows,
            bytes=0,
            malformed_count=quarantined,
            missing_timestamp_count=no_timestamp,
            event_id=load_event_id(manifest.job, manifest.run_id, topic, partition, start, width),
            emitted_at_ms=manifest.committed_at_ms,
            partition=partition,
            counter=manifest.run_id,
            job=manifest.job,
            sequence=manifest.sequence,
        )
        for (topic, partition, start), (rows, quarantined, no_timestamp) in sorted(merged.items())
    ]


@dataclass(frozen=True)
class PublishReport:
    """What one publishing did."""

    manifests: tuple[int, ...] = ()
    events: int = 0
    error: str | None = None


class LoadAuditPublisher:
    """Publishes one job's committed counts (see the module docstring). One per run, under the job lock."""

    def __init__(self, protocol: CommitProtocol, config: LoadSections, *, host: str | None = None) -> None:
        self.protocol = protocol
        self.config = config
        self.topic = config.audit.topic
        self.host = host or socket.gethostname()

    @property
    def pointer(self) -> str:
        return join(self.protocol.layout.meta, POINTER_NAME)

    def published_sequence(self) -> int:
        """The last manifest whose events are confirmed (0: none)."""
        fs = self.protocol.fs
        if not fs.exists(self.pointer):
            return 0
        try:
            return int(json.loads(fs.read_text(self.pointer))["sequence"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CommitError(f"{self.pointer}: not a valid audit pointer: {exc}") from exc

    def pending(self) -> list[int]:
        """The sequences of the committed manifests whose events are not confirmed yet, in order."""
        return list(range(self.published_sequence() + 1, self.protocol.latest_sequence() + 1))

    def publish_pending(self) -> PublishReport:
        """Publish every pending manifest's events, moving the pointer after each (see the docstring)."""
        pending = self.pending()
        if not pending:
            return PublishReport()
        events = self.publish_manifests(pending, move_pointer=True)
        return PublishReport(tuple(pending), events)

    def publish_manifests(self, sequences: Sequence[int], *, move_pointer: bool = False) -> int:
        """Publish the events of the manifests ``sequences`` (again, if they were: harmless); returns how
        many events the brokers confirmed. With ``move_pointer``, the pointer follows each manifest."""
        if not sequences:
            return 0
        config = self.config
        load = config.load
        servers = list(load.bootstrap_servers) or list(config.producer.bootstrap_servers)
        settings = config.producer.replace(
            **load.security_settings(),
            bootstrap_servers=servers,
            audit_topic=self.topic,
            client_id=f"lumber-load-audit-{load.job}",
        )
        confirmed = 0
        published = self.published_sequence() if move_pointer else 0
        with AuditPublisher(
            settings,
            registry=config.registry,
            registry_url=load.registry_url or None,
            zookeeper_connect=None if servers else config.zookeeper.connect,
        ) as publisher:
            for sequence in sequences:
                confirmed += publisher.publish(load_events(self.protocol.read_manifest(sequence), self.host))
                if move_pointer and sequence > published:
                    self.protocol.fs.write_text(
                        self.pointer, json.dumps({"sequence": sequence}) + "\n", overwrite=True
                    )
                    published = sequence
        return confirmed


def publish_load_counts(
    protocol: CommitProtocol, config: LoadSections, progress: Callable[[str], None]
) -> PublishReport:
    """What the load job calls at the end of a run: publish what is pending; never raises."""
    if not config.audit.publish_load_counts:
        return PublishReport()
    try:
        report = LoadAuditPublisher(protocol, config).publish_pending()
    except Exception as exc:  # the data is committed: any failure here waits for the next run
        log.debug("publishing the audit counts failed", exc_info=True)
        report = PublishReport(error=f"{type(exc).__name__}: {exc}")
    if report.error is not None:
        progress(
            f"audit: the committed counts were not published to {config.audit.topic} ({report.error}); the "
            "next run publishes them"
        )
    elif report.manifests:
        progress(
            f"audit: published {report.events} load counts of manifests "
            f"{report.manifests[0]}-{report.manifests[-1]} to {config.audit.topic}"
        )
    return report
