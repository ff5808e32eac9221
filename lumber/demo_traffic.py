"""Synthetic tracking traffic for the demo: page views, clicks and searches from several frontend hosts.

The traffic is a pure function of a :class:`TrafficSpec` (seeded), so its counts are known in advance:

* **How much.** For every hour ``h`` of the spec, every host and every topic,
  :meth:`TrafficSpec.count` = ``per_host_hour[topic] * host share % * hour factor %`` (integer division),
  e.g. ``1200 * 75 % * 130 % = 1170`` page views. The hour factors make a day's curve; the host shares an
  uneven load balancer.
* **When.** The events of one (hour, host, topic) are spread evenly over the hour with a seeded jitter, each
  strictly inside its hour; an hour's events come out in timestamp order.
* **Schema evolution.** Page views created before :attr:`TrafficSpec.evolution_ms` (the middle of the spec's
  time span) are ``page_view`` version 1; from then on every host writes version 2 (``page_view_v2``: adds
  ``load_time_ms``). The registry gets version 2 at that moment (:class:`TrafficProducer`).
* **Malformed messages.** ``malformed`` extra page views from ``malformed_host``, just after the switch (a
  bad deploy): in turn a wrong magic byte, an unknown schema id, a truncated Avro body and a JSON document
  instead of Avro. They are not in :meth:`TrafficSpec.count`; producers count them (the audit expects
  them) and the load quarantines them (``<warehouse>/_errors/page_view/...``).
* **What.** Realistic values: sessions (the message key, so a session stays in one partition), members
  (a quarter are visitors), pages, user agents, private IPs, search queries; version 2's load times are
  log-normal, slower on the smallest host.

:class:`TrafficProducer` sends an hour at a time through one
:class:`~broker.client.producer.producer.Producer` per host (each with its own ``host_name``, as on real
frontends), with the events' timestamps as the records' creation times, and flushes every producer at the end
of each hour, so that an hour's records precede the next hour's in every partition (what ``etl run
--until-hour`` cuts on).
"""

from __future__ import annotations

import json
import random
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.producer.producer import Producer
from broker.client.producer.producer_batch import RecordFuture
from schemas.serde import AvroSerde

HOUR_MS = 3_600_000
TOPICS = ("page_view", "click", "search")
#: the schema each topic's events are written with (page views switch to ``page_view_v2`` half-way)
TOPIC_SCHEMAS = {"page_view": "page_view", "click": "click", "search": "search"}
MALFORMED_KINDS = ("bad_magic_byte", "unknown_schema_id", "truncated_avro", "json_not_avro")
UNKNOWN_SCHEMA_ID = 999_999

_PAGES = (
    ("feed", "/feed/", 35),
    ("profile_view", "/in/{member}/", 25),
    ("job_search", "/jobs/search/?keywords={query}", 15),
    ("company_page", "/company/{company}/", 10),
    ("messaging", "/messaging/", 10),
    ("notifications", "/notifications/", 5),
)
_ELEMENTS = {
    "feed": ("like_button", "comment_button", "share_button", "post_link"),
    "profile_view": ("connect_button", "message_button", "follow_button"),
    "job_search": ("job_card", "apply_button", "save_job"),
    "company_page": ("follow_button", "jobs_tab", "website_link"),
    "messaging": ("thread", "send_button"),
    "notifications": ("notification_card",),
}
_QUERIES = (
    "data engineer",
    "kafka",
    "hadoop",
    "distributed systems",
    "product manager",
    "site reliability",
    "machine learning",
    "recruiter",
    "linkedin",
    "stream processing",
)
_VERTICALS = ("ALL", "PEOPLE", "JOBS", "COMPANIES", "GROUPS")
_COMPANIES = ("acme", "initech", "globex", "umbrella", "hooli", "stark-industries")
_USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "LinkedIn/9.29 (Android 14; Pixel 8)",
)
_SITE = "https://www.example.com"
#: Events per session and hour (page views); clicks and searches pick among the same sessions.
_VIEWS_PER_SESSION = 6


@dataclass(frozen=True)
class HostShare:
    """A frontend host and its share of the traffic, in percent of ``per_host_hour``."""

    name: str
    share_pct: int
    #: how much slower its pages load (version 2's ``load_time_ms``), in percent
    slowness_pct: int = 100


DEFAULT_HOSTS = (
    HostShare("app-1", 100),
    HostShare("app-2", 100),
    HostShare("app-3", 75),
    HostShare("app-4", 50, slowness_pct=160),
)


@dataclass(frozen=True)
class TrafficSpec:
    """What to generate (see the module docstring)."""

    #: start of the first hour, ms since the epoch (a multiple of an hour)
    start_ms: int
    hours: int = 3
    hosts: tuple[HostShare, ...] = DEFAULT_HOSTS
    #: events per host and hour at 100 % share and factor, per topic
    per_host_hour: tuple[tuple[str, int], ...] = (("page_view", 1200), ("click", 480), ("search", 240))
    #: the hours' factors in percent, cycled: a day's curve
    hour_factors_pct: tuple[int, ...] = (80, 100, 130, 110)
    malformed: int = 6
    malformed_host: str = "app-3"
    seed: int = 2011
    #: prepended to the topic names (tests use it to keep their topics apart)
    topic_prefix: str = ""

    def __post_init__(self) -> None:
        if self.start_ms % HOUR_MS:
            raise ValueError(f"start_ms {self.start_ms} is not the start of an hour")
        if self.hours < 1 or not self.hosts or not self.hour_factors_pct:
            raise ValueError("a traffic spec needs at least one hour, one host and one hour factor")
        if {topic for topic, _ in self.per_host_hour} - set(TOPICS):
            raise ValueError(f"per_host_hour: the topics are {', '.join(TOPICS)}")
        if self.malformed and self.malformed_host not in {h.name for h in self.hosts}:
            raise ValueError(f"malformed_host {self.malformed_host!r} is not one of the hosts")

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.hours * HOUR_MS

    @property
    def evolution_ms(self) -> int:
        """When the page views switch from version 1 to version 2: the middle of the time span."""
        return self.start_ms + self.hours * HOUR_MS // 2

    def hour_start_ms(self, index: int) -> int:
        return self.start_ms + index * HOUR_MS

    def topic_name(self, topic: str) -> str:
        return self.topic_prefix + topic

    def count(self, topic: str, host: str, index: int) -> int:
        """Well-formed events of ``topic`` from ``host`` in hour ``index`` (malformed ones not included)."""
        rate = dict(self.per_host_hour).get(topic, 0)
        share = next(h.share_pct for h in self.hosts if h.name == host)
        factor = self.hour_factors_pct[index % len(self.hour_factors_pct)]
        return rate * share * factor // 10_000

    @property
    def malformed_hour(self) -> int:
        """The hour (index) of the malformed messages: the one holding :attr:`evolution_ms`."""
        return min((self.evolution_ms - self.start_ms) // HOUR_MS, self.hours - 1)

    def total(self) -> int:
        """Every message of the spec, malformed ones included."""
        return self.malformed + sum(
            self.count(topic, host.name, index)
            for topic, _ in self.per_host_hour
            for host in self.hosts
            for index in range(self.hours)
        )


@dataclass(frozen=True)
class TrafficEvent:
    """One message to send: a record with its schema, or (``malformed``) the kind of breakage."""

    topic: str
    host: str
    timestamp_ms: int
    key: bytes
    #: the shipped schema the record is written with: page_view, page_view_v2, click or search
    schema: str
    record: Mapping[str, Any]
    #: empty, or one of :data:`MALFORMED_KINDS`
    malformed: str = ""


def _event_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _timestamps(rng: random.Random, hour_start_ms: int, count: int) -> list[int]:
    """``count`` increasing times strictly inside the hour, evenly spread with jitter."""
    if count == 0:
        return []
    slot = HOUR_MS // count
    return [hour_start_ms + i * HOUR_MS // count + rng.randrange(max(1, slot)) for i in range(count)]


@dataclass
class _Session:
    session_id: str
    member_id: int | None
    ip_address: str
    user_agent: str
    last_url: str | None = None


def _sessions(rng: random.Random, host: str, index: int, views: int) -> list[_Session]:
    out = []
    for n in range(max(1, views // _VIEWS_PER_SESSION)):
        member = None if rng.random() < 0.25 else rng.randrange(1, 50_000)
        out.append(
            _Session(
                session_id=f"{host}-{index}-{n:04d}-{rng.getrandbits(24):06x}",
                member_id=member,
                ip_address=f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                user_agent=rng.choice(_USER_AGENTS),
            )
        )
    return out


def _page(rng: random.Random) -> tuple[str, str]:
    key, template, _ = rng.choices(_PAGES, weights=[w for _, _, w in _PAGES])[0]
    path = template.format(
        member=f"member-{rng.randrange(1, 50_000)}",
        query=rng.choice(_QUERIES).replace(" ", "+"),
        company=rng.choice(_COMPANIES),
    )
    return key, _SITE + path


def generate_hour(spec: TrafficSpec, index: int) -> list[TrafficEvent]:
    """Every message of hour ``index`` of ``spec``, in timestamp order (see the module docstring)."""
    if not 0 <= index < spec.hours:
        raise ValueError(f"hour {index} is outside the spec's {spec.hours} hours")
    start = spec.hour_start_ms(index)
    events: list[TrafficEvent] = []
    for host in spec.hosts:
        rng = random.Random(f"{spec.seed}/{index}/{host.name}")  # noqa: S311 - synthetic data, seeded
        views = spec.count("page_view", host.name, index)
        sessions = _sessions(rng, host.name, index, views)
        for n, ts in enumerate(_timestamps(rng, start, views)):
            session = sessions[n % len(sessions)]
            page_key, url = _page(rng)
            record: dict[str, Any] = {
                "event_id": _event_id(rng),
                "timestamp_ms": ts,
                "host": host.name,
                "member_id": session.member_id,
                "session_id": session.session_id,
                "page_key": page_key,
                "page_url": url,
                "referrer_url": session.last_url,
                "user_agent": session.user_agent,
                "ip_address": session.ip_address,
            }
            session.last_url = url
            schema = "page_view"
            if ts >= spec.evolution_ms:
                schema = "page_view_v2"
                base_ms = rng.lognormvariate(6.0, 0.45) * host.slowness_pct / 100
                record["load_time_ms"] = None if rng.random() < 0.05 else round(base_ms)
            events.append(
                TrafficEvent(
                    spec.topic_name("page_view"), host.name, ts, session.session_id.encode(), schema, record
                )
            )
        for ts in _timestamps(rng, start, spec.count("click", host.name, index)):
            session = rng.choice(sessions)
            page_key, url = _page(rng)
            element = rng.choice(_ELEMENTS[page_key])
            click: dict[str, Any] = {
                "event_id": _event_id(rng),
                "timestamp_ms": ts,
                "host": host.name,
                "member_id": session.member_id,
                "session_id": session.session_id,
                "page_key": page_key,
                "element_id": element,
                "target_url": url if element.endswith("_link") or element == "job_card" else None,
                "position": rng.randrange(20) if element in ("job_card", "post_link") else None,
            }
            events.append(
                TrafficEvent(
                    spec.topic_name("click"), host.name, ts, session.session_id.encode(), "click", click
                )
            )
        for ts in _timestamps(rng, start, spec.count("search", host.name, index)):
            session = rng.choice(sessions)
            search: dict[str, Any] = {
                "event_id": _event_id(rng),
                "timestamp_ms": ts,
                "host": host.name,
                "member_id": session.member_id,
                "session_id": session.session_id,
                "query": rng.choice(_QUERIES),
                "vertical": rng.choices(_VERTICALS, weights=(50, 20, 20, 7, 3))[0],
                "result_count": rng.randrange(0, 5000),
                "page_number": 1 if rng.random() < 0.85 else rng.randrange(2, 6),
                "latency_ms": round(rng.lognormvariate(4.0, 0.4)),
            }
            events.append(
                TrafficEvent(
                    spec.topic_name("search"), host.name, ts, session.session_id.encode(), "search", search
                )
            )
    if spec.malformed and index == spec.malformed_hour:
        events.extend(_malformed(spec))
    events.sort(key=lambda e: (e.timestamp_ms, e.topic, e.host))
    return events


def _malformed(spec: TrafficSpec) -> list[TrafficEvent]:
    rng = random.Random(f"{spec.seed}/malformed")  # noqa: S311 - synthetic data, seeded
    out = []
    for n in range(spec.malformed):
        ts = spec.evolution_ms + 1000 * (n + 1)
        session_id = f"{spec.malformed_host}-broken-{n}"
        record: dict[str, Any] = {
            "event_id": _event_id(rng),
            "timestamp_ms": ts,
            "host": spec.malformed_host,
            "member_id": None,
            "session_id": session_id,
            "page_key": "feed",
            "page_url": _SITE + "/feed/",
            "referrer_url": None,
            "user_agent": _USER_AGENTS[0],
            "ip_address": "10.0.0.1",
            "load_time_ms": 0,
        }
        out.append(
            TrafficEvent(
                spec.topic_name("page_view"),
                spec.malformed_host,
                ts,
                session_id.encode(),
                "page_view_v2",
                record,
                MALFORMED_KINDS[n % len(MALFORMED_KINDS)],
            )
        )
    return out


def encode_event(event: TrafficEvent, serde: AvroSerde, schema_ids: Mapping[str, int]) -> bytes:
    """The message value of ``event``: its record in the wire format, or broken as its kind says."""
    if event.malformed == "json_not_avro":
        return json.dumps(dict(event.record)).encode()
    value = serde.encode(schema_ids[event.schema], dict(event.record))
    if event.malformed == "bad_magic_byte":
        return b"\x01" + value[1:]
    if event.malformed == "unknown_schema_id":
        return struct.pack(">bI", 0, UNKNOWN_SCHEMA_ID) + value[5:]
    if event.malformed == "truncated_avro":
        return value[: 5 + (len(value) - 5) // 3]
    if event.malformed:
        raise ValueError(f"unknown kind of malformed message {event.malformed!r}")
    return value


@dataclass
class HourSent:
    """What :meth:`TrafficProducer.send_hour` sent (and the brokers confirmed)."""

    index: int
    start_ms: int
    by_topic: Counter[str] = field(default_factory=Counter)
    by_host: Counter[str] = field(default_factory=Counter)
    by_schema: Counter[str] = field(default_factory=Counter)
    malformed: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_topic.values())


class TrafficProducer:
    """Sends a spec's traffic, an hour at a time, through one producer per host (see the module docstring).

    ``schema_ids`` maps the shipped schema names to their registry ids; the first version-2 page view
    calls ``register_v2`` (which returns the new id) before it is encoded: the producers' deploy of v2.
    """

    def __init__(
        self,
        spec: TrafficSpec,
        producers: Mapping[str, Producer],
        serde: AvroSerde,
        schema_ids: Mapping[str, int],
        register_v2: Callable[[], int],
    ) -> None:
        missing = {h.name for h in spec.hosts} - set(producers)
        if missing:
            raise ValueError(f"no producer for the hosts {', '.join(sorted(missing))}")
        self.spec = spec
        self.producers = producers
        self.serde = serde
        self.schema_ids = dict(schema_ids)
        self.register_v2 = register_v2

    def send_hour(
        self,
        index: int,
        on_switch: Callable[[int], None] = lambda _id: None,
        on_sent: Callable[[int], None] = lambda _n: None,
    ) -> HourSent:
        """Send hour ``index``, flush every producer and check every delivery (raises the first error).

        ``on_sent`` is called after each message is handed to its producer, with how many of this hour's
        were handed over so far (the demo kills a broker mid-traffic from it)."""
        sent = HourSent(index, self.spec.hour_start_ms(index))
        futures: list[RecordFuture] = []
        for event in generate_hour(self.spec, index):
            if event.schema == "page_view_v2" and event.schema not in self.schema_ids:
                self.schema_ids[event.schema] = self.register_v2()
                on_switch(self.schema_ids[event.schema])
            value = encode_event(event, self.serde, self.schema_ids)
            futures.append(
                self.producers[event.host].send(
                    event.topic, value, key=event.key, timestamp_ms=event.timestamp_ms
                )
            )
            sent.by_topic[event.topic] += 1
            sent.by_host[event.host] += 1
            sent.by_schema["malformed" if event.malformed else event.schema] += 1
            sent.malformed += bool(event.malformed)
            on_sent(sent.total)
        for producer in self.producers.values():
            producer.flush()
        for future in futures:
            future.result()
        return sent
