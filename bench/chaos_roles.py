"""The processes of ``bench/chaos.py`` that are not Lumber commands: producers, the consumer, the scheduler.

Each runs as its own process (so that the chaos run can ``kill -9`` or ``SIGSTOP`` it), started by
``bench/chaos.py`` as ``python bench/chaos_roles.py ROLE --config STACK_TOML ...``:

* ``producer``: one frontend host (``[producer] host_name``), an audited, idempotent, ``acks=all`` producer
  (:func:`audit.audited_producer.audited_producer`) sending page views and clicks at ``--rate`` records per
  second, each record stamped with the *virtual clock* (below). Its own log of what the brokers
  acknowledged (``--ack-log``) gets one line ``A <event_id> <topic> <virtual ms>`` per acknowledged record,
  written with one ``write`` per line from the thread that waits for the acknowledgements, in the order
  the records were sent (``F <event_id> <error>`` for a record whose delivery failed: it is not expected
  anywhere). A SIGKILL therefore leaves whole lines, and may miss only acknowledgements that arrived in
  the last moment: such records are *in flight at the kill*, which the oracle allows for (in
  ``bench/chaos_oracle.py``). Event ids are ``<host>-<instance>-<sequence>``: each start of a host is a new
  instance, so the oracle can tell which records a killed instance sent. SIGTERM: stop sending, close
  (which publishes the last audit counts), exit 0.
* ``consumer``: a member of a ZooKeeper consumer group
  (:class:`broker.client.groups.group_consumer.GroupConsumer`, the paper's groups) reading both topics and
  appending ``<topic> <partition> <offset>`` per record to ``--out``, one ``write`` per poll, before the next
  poll marks them consumed (as ``tests/broker/client/groups/group_member_process.py``): a crash never commits
  an unwritten record.
* ``schedule``: the hourly load's scheduler (:class:`pipeline.scheduler.Scheduler` with its production
  runner, :class:`pipeline.scheduler.SparkSubmitRunner`: one ``spark-submit jobs/load.py --until-hour H``
  per hour, exactly ``lumber etl schedule``) on the virtual clock.

**The virtual clock.** A chaos run of a few minutes must see several hourly loads, so its hours are short:
one *virtual hour* lasts ``--hour-s`` seconds of wall time. Virtual time is ``v0_ms + (now - t0_ms) *
speed`` with ``speed = 3600 / hour_s``; ``v0_ms`` is a whole hour in the past (so every virtual hour is
long over in wall time, and the brokers' time index and retention see ordinary past timestamps). The
producers stamp records (and their audit counts) with it; the scheduler reads it for "now" and sleeps
``seconds / speed``. Nothing else is compressed: the load cuts at whole hours of record time with
``--until-hour``, the audit counts by the records' timestamps, and ZooKeeper sessions, retries and
timeouts keep their wall-clock meaning.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import logging
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit.audited_producer import audited_producer
from broker.client.errors import GroupClosedError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.producer.producer_batch import RecordFuture
from lumber.config import LumberConfig, load_config
from lumber.etl_settings import submit_settings
from pipeline.scheduler import Scheduler, ScheduleStateStore, SparkSubmitRunner
from schemas.client import RegistryClientSettings, SchemaRegistryClient
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text

HOUR_MS = 3_600_000
TOPICS = ("page_view", "click")
#: of every 3 records, 2 are page views and 1 a click
TOPIC_CYCLE = ("page_view", "page_view", "click")
SEND_TICK_S = 0.05


class VirtualClock:
    """Virtual time (see the module docstring); also :class:`pipeline.scheduler.Clock`."""

    def __init__(self, t0_ms: int, v0_ms: int, hour_s: float) -> None:
        self.t0_ms = t0_ms
        self.v0_ms = v0_ms
        self.speed = 3600.0 / hour_s

    def now_ms(self) -> int:
        return self.v0_ms + int((time.time_ns() // 1_000_000 - self.t0_ms) * self.speed)

    def sleep(self, seconds: float, wake: threading.Event) -> None:
        wake.wait(max(0.0, seconds / self.speed))


def _say(line: str) -> None:
    print(f"{dt.datetime.now(tz=dt.UTC).strftime('%H:%M:%S')} {line}", flush=True)


def _clock(args: argparse.Namespace) -> VirtualClock:
    return VirtualClock(args.t0_ms, args.v0_ms, args.hour_s)


# ---------------------------------------------------------------------------------------------- producer


def _schema_ids(config: RegistryClientSettings, stop: threading.Event) -> dict[str, int]:
    """Register (idempotently) the two schemas; waits for a registry that is down (a fault may be on)."""
    while True:
        try:
            with SchemaRegistryClient.from_config(config) as registry:
                return {t: registry.register(f"{t}-value", shipped_schema_text(t)) for t in TOPICS}
        except Exception as exc:
            _say(f"registry not answering yet: {exc}")
            if stop.wait(1.0):
                raise SystemExit(0) from exc


def _record(topic: str, event_id: str, ts: int, host: str, rng: random.Random) -> dict[str, object]:
    session = f"{host}-s{rng.randrange(200)}"
    common: dict[str, object] = {
        "event_id": event_id,
        "timestamp_ms": ts,
        "host": host,
        "member_id": None if rng.random() < 0.25 else rng.randrange(1, 50_000),
        "session_id": session,
        "page_key": rng.choice(("feed", "profile_view", "job_search")),
    }
    if topic == "page_view":
        common.update(
            page_url="https://www.example.com/feed/",
            referrer_url=None,
            user_agent="Mozilla/5.0 (X11; Linux x86_64)",
            ip_address=f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        )
    else:
        common.update(element_id="like_button", target_url=None, position=None)
    return common


def run_producer(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    clock = _clock(args)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ids = _schema_ids(config.registry, stop)
    registry = SchemaRegistryClient.from_config(config.registry)
    serde = AvroSerde(registry)
    settings = config.producer.replace(
        host_name=args.host,
        client_id=f"chaos-{args.host}",  # stable across restarts: its audit journal is found again
        linger_ms=20,
        acks="all",
        enable_idempotence=True,
        audit_interval_ms=args.audit_interval_ms,
        delivery_timeout_ms=300_000,
        max_block_ms=300_000,
    )
    producer = audited_producer(
        settings, zookeeper_connect=config.zookeeper.connect, clock_ms=clock.now_ms, registry=config.registry
    )
    ack_fd = os.open(args.ack_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pending: collections.deque[tuple[RecordFuture, str, str, int]] = collections.deque()
    cond = threading.Condition()
    sending_done = threading.Event()

    def collect() -> None:
        while True:
            with cond:
                while not pending and not sending_done.is_set():
                    cond.wait(0.5)
                if not pending:
                    return
                future, event_id, topic, ts = pending.popleft()
            try:
                future.result()
            except Exception as exc:
                os.write(ack_fd, f"F {event_id} {type(exc).__name__}\n".encode())
            else:
                os.write(ack_fd, f"A {event_id} {topic} {ts}\n".encode())

    collector = threading.Thread(target=collect, name="acks", daemon=True)
    collector.start()
    rng = random.Random(f"{args.seed}/{args.host}/{args.instance}")
    per_tick = args.rate * SEND_TICK_S
    owed = 0.0
    sequence = 0
    _say(f"producer {args.host} instance {args.instance}: {args.rate}/s, schema ids {ids}")
    try:
        next_tick = time.monotonic()
        while not stop.is_set():
            owed += per_tick
            while owed >= 1 and not stop.is_set():
                owed -= 1
                topic = TOPIC_CYCLE[sequence % len(TOPIC_CYCLE)]
                event_id = f"{args.host}-{args.instance}-{sequence}"
                sequence += 1
                ts = clock.now_ms()
                value = serde.encode(ids[topic], _record(topic, event_id, ts, args.host, rng))
                try:
                    future = producer.send(topic, value, key=event_id.encode(), timestamp_ms=ts)
                except Exception as exc:
                    os.write(ack_fd, f"F {event_id} {type(exc).__name__}\n".encode())
                    continue
                with cond:
                    pending.append((future, event_id, topic, ts))
                    cond.notify()
            next_tick += SEND_TICK_S
            stop.wait(max(0.0, next_tick - time.monotonic()))
    finally:
        _say(f"producer {args.host}: stopping after {sequence} records; closing (publishes the audit counts)")
        producer.close()
        sending_done.set()
        with cond:
            cond.notify()
        collector.join(timeout=60)
        os.write(ack_fd, f"C {args.host}-{args.instance} {sequence}\n".encode())
        os.close(ack_fd)
        registry.close()
    return 0


# ---------------------------------------------------------------------------------------------- consumer


def run_consumer(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    member = GroupConsumer(
        args.group,
        zookeeper_connect=config.zookeeper.connect,
        config=GroupConfig(
            protocol=args.protocol,
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=max(args.session_timeout_ms // 3, 100),
            auto_commit_interval_ms=500,
            release_timeout_ms=10_000,
            member_id_prefix=args.prefix,
        ),
        consumer_config=config.consumer.replace(auto_offset_reset="earliest", fetch_max_wait_ms=200),
    )
    out = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        member.subscribe(list(TOPICS))
        while not stop.is_set():
            records = member.poll(timeout_ms=200)
            if records:
                os.write(
                    out, b"".join(b"%s %d %d\n" % (r.topic.encode(), r.partition, r.offset) for r in records)
                )
    except GroupClosedError:
        pass
    finally:
        member.close()
        os.close(out)
    return 0


# ---------------------------------------------------------------------------------------------- scheduler


def run_schedule(args: argparse.Namespace) -> int:
    config: LumberConfig = load_config(args.config)
    clock = _clock(args)
    settings = config.schedule
    runner = SparkSubmitRunner(
        submit_settings(config), kill_timeout_s=settings.kill_timeout_ms / 1000, say=_say
    )
    scheduler = Scheduler(
        runner,
        ScheduleStateStore(Path(settings.state_file), config.load.job),
        settings,
        clock=clock,
        say=_say,
    )
    restore = scheduler.install_signal_handlers()
    try:
        finished = scheduler.run()
    finally:
        restore()
    _say(f"scheduler finished: {finished.code} {finished.reason}")
    return finished.code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=("producer", "consumer", "schedule"))
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--t0-ms", type=int, default=0)
    parser.add_argument("--v0-ms", type=int, default=0)
    parser.add_argument("--hour-s", type=float, default=120.0)
    parser.add_argument("--host", default="app-1")
    parser.add_argument("--instance", type=int, default=0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--audit-interval-ms", type=int, default=2000)
    parser.add_argument("--ack-log", type=Path)
    parser.add_argument("--group", default="chaos-readers")
    parser.add_argument("--prefix", default="reader")
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    parser.add_argument("--protocol", choices=("zookeeper", "kafka"), default="zookeeper")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        return {"producer": run_producer, "consumer": run_consumer, "schedule": run_schedule}[args.role](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
