"""Publishing a tier's audit counts to the audit topic every N seconds and on close.

An :class:`AuditEmitter` holds an :class:`~audit.audit_counter.AuditCounter` and publishes what it counted
through a producer (the *publishing producer*). For the producer tier it is the data producer's
:class:`~broker.client.producer.delivery_listener.DeliveryListener`: the data producer tells it of every batch
it finished (:meth:`AuditEmitter.on_completion`, which counts it) and closes it last; the emitter publishes
through a producer of its own, made from the same settings (:meth:`AuditEmitter.for_producer`, used by
:func:`audit.audited_producer.audited_producer`), so the Kafka client never depends on the audit, and the
audit events are never counted as data. The mirror tier gives it the mirror's own target producer
instead (:class:`mirror.mirror_audit.MirrorAuditEmitter`). A background thread, every
``audit_interval_ms``:

1. takes the counts confirmed since the last emission as events (:meth:`AuditCounter.take`) into its
   *outbox*;
2. sends every outbox event that is not already in flight to ``audit_topic`` through the publishing
   producer (key: the counted topic; value: :class:`~audit.audit_codec.AuditEventCodec`'s Avro, whose
   schema is registered at ``audit_registry_url`` on first use, by a client with ``[registry]``'s credentials
   and CA file);
3. drops an event from the outbox once the broker confirmed it; a failed send or encoding (registry down,
   topic not there) leaves it in the outbox for the next round, with the same id.

**The persistent outbox.** With ``audit_state_dir`` set, the counter journals what it counts, takes and
sees confirmed (:mod:`audit.audit_journal`: ``<state dir>/producer-<client_id>.journal``); the emitter tells
it when every event of a sequence is confirmed (:meth:`AuditCounter.published`) and, as it starts, puts the
events a killed predecessor with the same ``client_id`` left unconfirmed into its outbox, where they are
published again with their ids (a reader counts each id once). Without it, the outbox lives in memory and
what a ``kill -9``-ed process had counted and not published is lost.

**The audit topic.** The emitter creates ``audit_topic`` (``audit_topic_partitions`` partitions) if it is
missing, as Kafka's brokers create ``__consumer_offsets`` whatever their auto-create switch says
(:func:`~broker.client.producer.internal_topic.ensure_topic`: one Metadata question, then CreateTopics, a
creation race being success). It does so on its thread *as it starts*, not in the producer's constructor, and
again *before a publish* until that once succeeds:

* starting: a cluster that refuses (creation not allowed, no live broker) is reported at once, at ERROR
  level with the command that creates the topic by hand, rather than one interval (or a whole run) later;
  yet building the emitter (and its producer) never waits on, nor fails because of, the cluster: the data
  sends have their own timeouts and retries, and the cluster may simply not be up yet;
* before a publish: the events are sent only once the topic is known to exist, so a send never waits
  ``max_block_ms`` for a topic nobody creates. A refusal fails that round at once (no wait) and leaves the
  events in the outbox, logged at ERROR level; the next round (or :meth:`AuditEmitter.close`) asks again.

:meth:`AuditEmitter.close` (the last thing the data producer's ``close()`` does, once every batch it
accepted was counted; the mirror calls it before closing its producer) stops the thread, flushes the
publishing producer (for the mirror: its copies, so that they are counted), emits the last counts and
waits for the outbox to empty, resending what failed, until the close deadline (``timeout_s``, else
``delivery_timeout_ms``), then closes the publishing producer if it is its own. A clean close therefore
loses no event; events still undelivered at the deadline are logged at ERROR level with their full
content, never dropped silently.

Thread safety: the outbox is guarded by a lock that is never held while sending (a send may wait for
buffer space, which the delivery callbacks free); making sure of the topic has a lock of its own, so the
thread and :meth:`AuditEmitter.close` never create it twice. A refusal is logged at ERROR level once, its
repetitions (every round, every resending round of close) at DEBUG level.
"""

from __future__ import annotations

import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from audit.audit_counter import AuditCounter
from audit.audit_event import AuditEvent
from audit.audit_journal import AuditJournal, journal_path
from broker.client.errors import ClientError, TopicCreationError
from broker.client.producer.internal_topic import ensure_producer_topic
from broker.client.producer.producer import Producer
from broker.client.producer.producer_batch import ProducerBatch, RecordMetadata
from broker.client.producer.producer_config import ProducerConfig
from broker.clock import Clock, system_clock_ms
from schemas.client import RegistryClientSettings
from schemas.errors import SchemaError

if TYPE_CHECKING:
    from audit.audit_codec import AuditEventCodec

log = logging.getLogger(__name__)

#: Rounds of resending at close after the first emission, each waiting for the previous one's outcome.
_CLOSE_ROUNDS = 5


def _new_codec(config: ProducerConfig, registry: RegistryClientSettings) -> AuditEventCodec:
    # imported here: producers without an audit never load the registry client
    from audit.audit_codec import AuditEventCodec  # noqa: PLC0415

    return AuditEventCodec.from_config(
        registry,
        config.audit_topic,
        url=config.audit_registry_url or None,
        timeout_s=config.request_timeout_ms / 1000,
    )


def open_journal(config: ProducerConfig, tier: str) -> AuditJournal | None:
    """The journal of the emitter named by ``config.client_id`` under ``config.audit_state_dir`` (None
    when that is empty); raises :class:`~audit.errors.AuditError` when another emitter holds it."""
    if not config.audit_state_dir:
        return None
    return AuditJournal.open(journal_path(config.audit_state_dir, tier, config.client_id))


def new_counter(config: ProducerConfig, clock_ms: Clock = system_clock_ms) -> AuditCounter:
    """The counter of one producer object: its host, a fresh instance id (or the one its journal holds:
    ``audit_state_dir``), the configured window."""
    return AuditCounter(
        host=config.host_name or socket.gethostname(),
        counter=f"{config.client_id}-{secrets.token_hex(4)}",
        window_ms=config.audit_window_ms,
        audit_topic=config.audit_topic,
        clock_ms=clock_ms,
        journal=open_journal(config, "producer"),
    )


class AuditEmitter:
    """Publishes one tier's audit counts; see the module docstring. A
    :class:`~broker.client.producer.delivery_listener.DeliveryListener`."""

    def __init__(
        self,
        producer: Producer,
        config: ProducerConfig,
        counter: AuditCounter,
        *,
        owns_producer: bool,
        registry: RegistryClientSettings,
    ) -> None:
        """``producer`` publishes the events (closed by :meth:`close` when ``owns_producer``); ``config``
        holds the audit settings (``audit_*``, ``delivery_timeout_ms``, ``retry_backoff_ms``);
        ``registry`` is ``[registry]`` (the codec's client: its credentials and CA file; the URL is
        ``audit_registry_url``)."""
        self._producer = producer
        self._owns_producer = owns_producer
        self._config = config
        self.topic = config.audit_topic
        self.counter = counter
        self._registry = registry
        self._codec: AuditEventCodec | None = None
        self._lock = threading.Lock()
        self._outbox: dict[str, AuditEvent] = {}
        self._in_flight: set[str] = set()
        #: sequence -> ids of its events not confirmed yet (a sequence confirmed whole is journaled)
        self._unconfirmed: dict[int, set[str]] = {}
        self._add_to_outbox(counter.recovered())
        self._delivered = 0
        self._closed = False
        self._topic_ready = False
        self._topic_lock = threading.Lock()
        self._last_refusal = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lumber-producer-audit", daemon=True)
        self._thread.start()

    @classmethod
    def for_producer(
        cls,
        config: ProducerConfig,
        *,
        bootstrap_servers: Sequence[str] | None = None,
        zookeeper_connect: str | None = None,
        clock_ms: Clock = system_clock_ms,
        registry: RegistryClientSettings,
    ) -> AuditEmitter:
        """The emitter of a producer configured with ``config`` (``audit_interval_ms`` above 0), with a
        publishing producer of its own on the same cluster and settings (never audited itself), encoding
        through a client of ``registry`` (``[registry]``)."""
        counter = new_counter(config, clock_ms)  # first: a journal in use is refused before any thread
        publishing = config.replace(audit_interval_ms=0, client_id=f"{config.client_id}-audit")
        try:
            producer = Producer(
                publishing, bootstrap_servers=bootstrap_servers, zookeeper_connect=zookeeper_connect
            )
        except BaseException:
            if counter.journal is not None:
                counter.journal.close()
            raise
        return cls(producer, config, counter, owns_producer=True, registry=registry)

    def on_completion(self, batch: ProducerBatch, base_offset: int, error: BaseException | None) -> None:
        """The data producer finished ``batch``: count it."""
        self.counter.count_batch(batch, error)

    # ---------------------------------------------------------------------------------- emitting

    def _run(self) -> None:
        interval_s = self._config.audit_interval_ms / 1000
        try:
            self.ensure_topic()
        except TopicCreationError as exc:  # reported now; every publish asks again until it exists
            self._report_refusal("audit: %s", exc)
        except Exception:
            log.exception("audit: checking the audit topic %s failed", self.topic)
        while not self._stop.wait(interval_s):
            try:
                self.emit()
            except Exception:
                log.exception(
                    "the producer's audit emitter failed to emit; it tries again in %.1f s", interval_s
                )

    def emit(self) -> int:
        """Take the new counts and send every outbox event not in flight; returns how many were sent."""
        self._add_to_outbox(self.counter.take())
        with self._lock:
            todo = [e for i, e in self._outbox.items() if i not in self._in_flight]
            self._in_flight.update(e.event_id for e in todo)
        if not todo:
            return 0
        try:
            self.ensure_topic()
        except TopicCreationError as exc:
            with self._lock:
                self._in_flight.difference_update(e.event_id for e in todo)
            self._report_refusal(f"audit: {len(todo)} events stay queued with their ids: %s", exc)
            return 0
        sent = 0
        for index, event in enumerate(todo):
            try:
                payload = self._codec_or_new().encode(event)
                self._producer.send(
                    self.topic,
                    payload,
                    key=event.topic.encode("utf-8"),
                    on_delivery=self._callback(event.event_id),
                )
            except (ClientError, SchemaError) as exc:
                with self._lock:
                    self._in_flight.difference_update(e.event_id for e in todo[index:])
                log.warning(
                    "audit: %d events for %s not sent (%s); they stay queued with their ids",
                    len(todo) - index,
                    self.topic,
                    exc,
                )
                break
            sent += 1
        return sent

    def _add_to_outbox(self, events: Sequence[AuditEvent]) -> None:
        with self._lock:
            for event in events:
                self._outbox[event.event_id] = event
                self._unconfirmed.setdefault(event.sequence, set()).add(event.event_id)

    def ensure_topic(self) -> None:
        """Create the audit topic unless it exists (once it does, never asks again); raises
        :class:`TopicCreationError` at once when the cluster refuses (see the module docstring)."""
        if self._topic_ready:
            return
        with self._topic_lock:
            if not self._topic_ready:
                ensure_producer_topic(self._producer, self.topic, self._config.audit_topic_partitions)
                self._topic_ready = True

    def _report_refusal(self, template: str, exc: TopicCreationError) -> None:
        """ERROR the first time this is said, DEBUG while it repeats (``template`` has one ``%s``)."""
        message = template % exc
        repeated = message == self._last_refusal
        self._last_refusal = message
        log.log(logging.DEBUG if repeated else logging.ERROR, "%s", message)

    def _codec_or_new(self) -> AuditEventCodec:
        if self._codec is None:
            self._codec = _new_codec(self._config, self._registry)
        return self._codec

    def _callback(self, event_id: str) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        def delivered(_metadata: RecordMetadata | None, error: BaseException | None) -> None:
            confirmed: int | None = None
            with self._lock:
                self._in_flight.discard(event_id)
                event = self._outbox.pop(event_id, None) if error is None else None
                if event is not None:
                    self._delivered += 1
                    ids = self._unconfirmed.get(event.sequence)
                    if ids is not None:
                        ids.discard(event_id)
                        if not ids:
                            del self._unconfirmed[event.sequence]
                            confirmed = event.sequence
            if confirmed is not None:
                try:
                    self.counter.published(confirmed)
                except OSError:  # the events are confirmed: at worst published again, same ids
                    log.exception("audit: journaling sequence %d as confirmed failed", confirmed)
            if error is not None:
                log.warning("audit event %s not delivered (%s); it is sent again", event_id, error)

        return delivered

    @property
    def pending(self) -> list[AuditEvent]:
        """Events taken and not confirmed yet."""
        with self._lock:
            return list(self._outbox.values())

    @property
    def delivered(self) -> int:
        """Events the brokers confirmed."""
        with self._lock:
            return self._delivered

    # ---------------------------------------------------------------------------------- closing

    def close(self, timeout_s: float | None = None) -> None:
        """Emit the last counts and wait for every event (see the module docstring). Idempotent."""
        if self._closed:
            return
        self._closed = True
        budget_s = self._config.delivery_timeout_ms / 1000 if timeout_s is None else timeout_s
        deadline = time.monotonic() + budget_s
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(max(0.0, deadline - time.monotonic()))
        try:
            # the mirror's copies go through this producer: every outcome counted before the last take
            self._producer.flush(max(0.0, deadline - time.monotonic()))
            for _ in range(1 + _CLOSE_ROUNDS):
                self.emit()
                self._producer.flush(max(0.0, deadline - time.monotonic()))
                if not self.pending or time.monotonic() >= deadline:
                    break
                time.sleep(min(self._config.retry_backoff_ms / 1000, max(0.0, deadline - time.monotonic())))
        except TimeoutError as exc:
            log.warning("audit: closing ran out of time: %s", exc)
        except Exception:  # the producer must close all the same; what is left is logged below
            log.exception("audit: publishing the last counts failed")
        finally:
            left = self.pending
            journal = self.counter.journal
            if left and journal is not None:
                log.warning(
                    "audit: %d events could not be delivered to %s before the producer closed; they stay "
                    "in the journal %s, published at the next start with the same ids",
                    len(left),
                    self.topic,
                    journal.path,
                )
            elif left:
                log.error(
                    "audit: %d events could not be delivered to %s before the producer closed; their "
                    "counts: %s",
                    len(left),
                    self.topic,
                    json.dumps([e.to_record() for e in left]),
                )
            if journal is not None:
                journal.close()
            if self._codec is not None:
                self._codec.close()
            if self._owns_producer:
                self._producer.close(max(0.0, deadline - time.monotonic()))
