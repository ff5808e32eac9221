"""The faults of the chaos run (:mod:`bench.chaos`, whose docstring lists every kind): each drawn from a
seeded schedule, injected into the system under test (:class:`bench.chaos_stack.ChaosStack`), healed after a
random interval, and timed until the part is healthy again; the full-disk fault's probes of the broker whose
log dir is full; the count of what the loads went through while the registry was down.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.chaos_common import (
    BROKERS,
    DISK_BROKER,
    PROBE_FULL_VALUE,
    PROBE_RECORDS,
    PROBE_TOPIC,
    PRODUCERS,
    READERS,
    SESSION_TIMEOUT_MS,
    TOPICS,
    Fault,
    file_size,
    http_ok,
    say,
    wait_for,
)
from bench.chaos_process import cmdline
from bench.chaos_stack import ChaosStack
from broker.cluster.topic_admin import TopicAdmin
from broker.record.topic_partition import TopicPartition

FAULT_KINDS = (
    "broker_kill",
    "broker_pause",
    "zookeeper_kill",
    "registry_kill",
    "registry_down_during_load",
    "producer_kill",
    "consumer_kill",
    "consumer_pause",
    "mirror_kill",
    "load_driver_kill",
    "spark_task_kill",
    "broker_disk_full",
    "warehouse_disk_full",
)


class FaultInjector:
    """Draws, injects, heals and times the faults of one run; counts what they did for the report.

    Concurrency: :meth:`fault_loop` runs in ``--concurrent`` threads. A fault first claims the resources it
    touches (:meth:`_claim` under :attr:`busy_lock`; ``"*"``, ZooKeeper's kill, excludes every other
    fault), so that no two threads signal one process. Each counter is updated only by faults that hold one
    claim (the registry counters under ``"load"``, the disk-full ones under broker 2, :attr:`mirror_kills`
    under ``"mirror"``), so no two threads update one counter; :attr:`faults`, :attr:`killed_instances` and
    :attr:`failures` are only appended to (atomic under the GIL). All are read once the threads have ended.
    :attr:`rng` (the consumer faults' choice of consumer, the hold times) is shared by the threads.
    """

    def __init__(self, stack: ChaosStack, seed: int, failures: list[str]) -> None:
        self.stack = stack
        self.seed = seed
        self.failures = failures
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        self.killed_instances: set[str] = set()
        self.mirror_kills = 0
        self.busy: set[str] = set()
        self.busy_lock = threading.Lock()
        self.stop_faults = threading.Event()
        self.registry_task_failures = 0
        self.registry_failed_runs = 0
        self.disk_full_produce_errors: Counter[str] = Counter()
        self.disk_full_reads = [0, 0]  # records read back from the full broker, records wanted

    # -- faults ----------------------------------------------------------------------------------------

    def _claim(self, resources: set[str]) -> bool:
        with self.busy_lock:
            if "*" in self.busy or (resources & self.busy) or ("*" in resources and self.busy):
                return False
            self.busy |= resources
            return True

    def _release(self, resources: set[str]) -> None:
        with self.busy_lock:
            self.busy -= resources

    def _hold(self, low: float, high: float) -> float:
        held = self.rng.uniform(low, high)
        time.sleep(held)
        return held

    def _recover(
        self, fault: Fault, healthy: Callable[[], bool], bound_s: float = 180.0, since: float | None = None
    ) -> None:
        """Wait for ``healthy``; the recovery time counts from ``since`` (the healing step's start)."""
        t = time.monotonic() if since is None else since
        if wait_for(healthy, bound_s):
            fault.recovery_s = time.monotonic() - t
        else:
            fault.ok = False
            fault.detail += f"; NOT recovered within {bound_s:.0f} s"

    def _wait_for_load(self, bound_s: float) -> bool:
        return wait_for(lambda: bool(self.stack.load_driver_pids()), bound_s, 0.2)

    def fault(self, kind: str, rng: random.Random) -> Fault | None:
        """Inject one fault of ``kind``, heal it, wait for recovery; None if it could not start now."""
        broker = rng.randrange(BROKERS)
        host = f"app-{rng.randrange(1, PRODUCERS + 1)}"
        resources: dict[str, set[str]] = {
            "broker_kill": {f"broker-{broker}", "brokers"},
            "broker_pause": {f"broker-{broker}", "brokers"},
            "zookeeper_kill": {"*"},
            "registry_kill": {"registry"},
            "registry_down_during_load": {"registry", "load"},
            "producer_kill": {f"producer-{host}"},
            "consumer_kill": {"consumers"},
            "consumer_pause": {"consumers"},
            "mirror_kill": {"mirror"},
            "load_driver_kill": {"load"},
            "spark_task_kill": {"load"},
            "broker_disk_full": {f"broker-{DISK_BROKER}", "brokers"},
            "warehouse_disk_full": {"load", "warehouse"},
        }
        wanted = resources[kind]
        if not self._claim(wanted):
            return None
        try:
            return self._inject(kind, broker, host, rng)
        finally:
            self._release(wanted)

    def _inject(self, kind: str, broker: int, host: str, rng: random.Random) -> Fault | None:
        hour = self.stack.hour_s
        if kind in ("broker_kill", "broker_pause"):
            proc = self.stack.procs[f"broker-{broker}"]
            fault = Fault(kind, proc.name, self.stack.elapsed())
            if kind == "broker_kill":
                proc.kill9()
                fault.held_s = self._hold(3, 15)
                heal = time.monotonic()
                proc.start()
            else:
                proc.signal(signal.SIGSTOP)
                proc.stopped = True
                fault.held_s = self._hold(SESSION_TIMEOUT_MS / 1000 + 2, SESSION_TIMEOUT_MS / 1000 + 8)
                heal = time.monotonic()
                proc.signal(signal.SIGCONT)
                proc.stopped = False
                fault.detail = f"paused past its {SESSION_TIMEOUT_MS} ms ZooKeeper session"
            self._recover(fault, lambda: self.stack.broker_healthy(broker), since=heal)
            return fault
        if kind == "zookeeper_kill":
            proc = self.stack.procs["zookeeper"]
            fault = Fault(kind, "zookeeper", self.stack.elapsed())
            proc.kill9()
            fault.held_s = self._hold(2, 10)
            heal = time.monotonic()
            proc.start()
            self._recover(fault, self.stack.cluster_healthy, 240, since=heal)
            return fault
        if kind in ("registry_kill", "registry_down_during_load"):
            proc = self.stack.procs["registry"]
            sched_from = file_size(self.stack.procs["scheduler"].log_path)
            if kind == "registry_down_during_load" and not self._wait_for_planned(sched_from, 2 * hour + 30):
                return None
            fault = Fault(kind, "registry", self.stack.elapsed())
            before = self.stack.committed_loads()
            proc.kill9()
            # during a load: down long enough for the tasks to reach their first decode (a PySpark worker
            # starts in seconds on a loaded machine) and for Spark's retries of a failed one
            fault.held_s = self._hold(3, 15) if kind == "registry_kill" else self._hold(8, 20)
            heal = time.monotonic()
            proc.start()
            url = self.stack.config.registry.url + "/subjects"
            if kind == "registry_kill":
                self._recover(fault, lambda: http_ok(url), since=heal)
            else:
                self._recover(fault, self.stack.load_committed_after(before), 6 * hour + 120, since=heal)
                fault.detail = "killed once the load's tasks ran; " + self._load_effects(sched_from)
            return fault
        if kind == "producer_kill":
            proc = self.stack.procs[f"producer-{host}"]
            fault = Fault(kind, proc.name, self.stack.elapsed())
            self.killed_instances.add(f"{host}-{self.stack.producer_instances[host]}")
            proc.kill9()
            fault.held_s = self._hold(1, 8)
            self.stack.producer_instances[host] += 1
            size = file_size(self.stack.ack_log(host))
            heal = time.monotonic()
            proc.start()
            self._recover(fault, lambda: file_size(self.stack.ack_log(host)) > size, since=heal)
            return fault
        if kind in ("consumer_kill", "consumer_pause"):
            name = self.rng.choice(sorted(READERS))
            _group, protocol, session_ms = READERS[name]
            proc = self.stack.procs[name]
            reader_log = self.stack.reader_out(name)
            fault = Fault(kind, f"{name} ({protocol} group)", self.stack.elapsed())
            if kind == "consumer_kill":
                proc.kill9()
                fault.held_s = self._hold(1, 8)
                size = file_size(reader_log)
                heal = time.monotonic()
                proc.start()
            else:
                proc.signal(signal.SIGSTOP)
                proc.stopped = True
                fault.held_s = self._hold(session_ms / 1000 + 2, session_ms / 1000 + 8)
                size = file_size(reader_log)
                heal = time.monotonic()
                proc.signal(signal.SIGCONT)
                proc.stopped = False
                fault.detail = f"paused past its {session_ms} ms group session"
            healthy = lambda: self.stack.reader_owns_all(name) and file_size(reader_log) > size  # noqa: E731
            self._recover(fault, healthy, since=heal)
            return fault
        if kind == "mirror_kill":
            proc = self.stack.procs["mirror"]
            fault = Fault(kind, "mirror", self.stack.elapsed())
            self.mirror_kills += 1
            proc.kill9()
            fault.held_s = self._hold(1, 8)
            total = self.stack.target_total()
            heal = time.monotonic()
            proc.start()
            self._recover(fault, lambda: self.stack.target_total() > total, since=heal)
            return fault
        if kind in ("load_driver_kill", "spark_task_kill"):
            if not self._wait_for_load(2 * hour + 30):
                return None
            before = self.stack.committed_loads()
            fault = Fault(kind, "load", self.stack.elapsed())
            if kind == "load_driver_kill":
                time.sleep(rng.uniform(0, 5))
                pids = self.stack.load_driver_pids()
            else:
                pids = []
                wait_for(lambda: bool(self.stack.spark_worker_pids()), 60, 0.1)
                time.sleep(rng.uniform(0, 1))
                pids = self.stack.spark_worker_pids()
            if not pids:
                return None
            victim = rng.choice(pids)
            fault.detail = f"kill -9 pid {victim} ({cmdline(victim)[:60]}...)"
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
            self._recover(fault, self.stack.load_committed_after(before), 6 * hour + 120)
            return fault
        if kind in ("broker_disk_full", "warehouse_disk_full"):
            if not self.stack.tmpfs_ok:
                return None
            if kind == "broker_disk_full":
                where = self.stack.work / "live" / f"broker-{DISK_BROKER}" / "logs"
                fault = Fault(kind, f"broker-{DISK_BROKER}", self.stack.elapsed())
            else:
                if not self._wait_for_load(2 * hour + 30):
                    return None
                where = self.stack.work / "warehouse"
                fault = Fault(kind, "warehouse", self.stack.elapsed())
            before = self.stack.committed_loads()
            if kind == "broker_disk_full":
                self._elect_disk_broker()
            log_from = file_size(self.stack.procs[f"broker-{DISK_BROKER}"].log_path)
            filler = where / ".chaos-filler"
            # unbuffered, and the close inside the suppression: a buffered close flushes into the full
            # disk and raised ENOSPC out of the fault (a CI run of 2026-11-29)
            with contextlib.suppress(OSError), filler.open("wb", buffering=0) as out:
                while True:
                    out.write(b"\0" * (1 << 20))
                    out.flush()
            filled = time.monotonic()
            failed = self.stack.failed_loads()
            probes = self._probe_full_broker() if kind == "broker_disk_full" else ""
            if kind == "warehouse_disk_full":
                # full until the running load has ended (it must fail, having committed nothing)
                wait_for(lambda: not self.stack.load_driver_pids(), 4 * hour + 120, 0.5)
            self._hold(5, 15)
            fault.held_s = time.monotonic() - filled
            heal = time.monotonic()
            filler.unlink()
            if kind == "broker_disk_full":
                proc = self.stack.procs[f"broker-{DISK_BROKER}"]
                with proc.log_path.open("rb") as log:
                    log.seek(log_from)
                    offline = b"log is offline" in log.read()
                proc.terminate()
                proc.start()
                fault.detail = (
                    "log dir filled; restarted"
                    + (" (its log had gone offline)" if offline else "")
                    + f"; while full: {probes}"
                )
                self._recover(fault, lambda: self.stack.broker_healthy(DISK_BROKER), since=heal)
            else:
                outcome = "failed" if self.stack.failed_loads() > failed else "did not fail"
                fault.detail = f"warehouse filled during a load, which {outcome}"
                self._recover(fault, self.stack.load_committed_after(before), 6 * hour + 120, since=heal)
            return fault
        raise ValueError(kind)

    def _wait_for_planned(self, sched_from: int, bound_s: float) -> bool:
        """Wait until a load has planned (the driver's ``planned:`` line, passed on by the scheduler, after
        byte ``sched_from`` of its log) and Spark runs its first task: the registry is then needed by the
        tasks only (each Python worker fetches a writer schema once, when it decodes its first records)."""
        log_path = self.stack.procs["scheduler"].log_path

        def tasks_run() -> bool:
            with log_path.open("rb") as log:
                log.seek(sched_from)
                text = log.read().decode(errors="replace")
            after = text.split("] planned: ", 1)
            if len(after) < 2 or not self.stack.load_driver_pids():
                return False
            return any(int(m.group(1)) > 0 for m in re.finditer(r"tasks done \((\d+) running\)", after[1]))

        return wait_for(tasks_run, bound_s, 0.1)

    def _load_effects(self, sched_from: int) -> str:
        """What the load that planned after byte ``sched_from`` of the scheduler's log, and those after it,
        went through: Spark's failed task attempts (``Lost task`` in each run's Spark log: each was retried),
        failed runs (retried by the scheduler), quarantined rows."""
        text = self.stack.procs["scheduler"].log_path.read_bytes().decode(errors="replace")
        planned_at = text.find("] planned: ", sched_from)
        submit_at = text.rfind("spark-submit ...", 0, planned_at if planned_at >= 0 else len(text))
        lines = text[max(submit_at, 0) :].splitlines()
        lost = 0
        causes: Counter[str] = Counter()
        for line in lines:
            if "Spark's log: " in line and "spark-submit ..." in line:
                spark_log = Path(line.rsplit("Spark's log: ", 1)[1].strip())
                with contextlib.suppress(OSError):
                    spark_lines = spark_log.read_text(errors="replace").splitlines()
                    for i, spark_line in enumerate(spark_lines):
                        if "Lost task" in spark_line:
                            lost += 1
                            # the cause: the Python traceback that follows, up to Spark's next log line
                            trace = [spark_line]
                            for more in spark_lines[i + 1 : i + 120]:
                                if re.match(r"\d\d/\d\d/\d\d ", more):
                                    break
                                trace.append(more)
                            causes["registry" if "egistry" in "\n".join(trace) else "other"] += 1
        failed = sum(1 for line in lines if "): failed: " in line)
        committed = [line for line in lines if "): committed in " in line]
        quarantined = [
            int(line.split(" quarantined")[0].rsplit(", ", 1)[1])
            for line in committed
            if " quarantined" in line
        ]
        self.registry_task_failures += lost
        self.registry_failed_runs += failed
        return (
            f"{lost} failed task attempt(s), retried by Spark ({dict(causes)} by cause), {failed} failed "
            f"run(s) retried by the scheduler, {len(committed)} committed run(s) with {sum(quarantined)} "
            "quarantined"
        )

    def _elect_disk_broker(self) -> None:
        """Make broker ``DISK_BROKER`` the leader of the probe topic's partition 0 (its preferred replica),
        so that the full-disk probes have a partition it leads (leadership moves away at its restarts)."""
        assert self.stack.zk is not None
        admin = TopicAdmin(self.stack.zk)
        probe0 = TopicPartition(PROBE_TOPIC, 0)
        if admin.describe_states(PROBE_TOPIC)[0].leader == DISK_BROKER:
            return
        with contextlib.suppress(Exception):  # a pending election: the wait below still tells
            admin.request_preferred_election([probe0])
        if not wait_for(lambda: admin.describe_states(PROBE_TOPIC)[0].leader == DISK_BROKER, 20, 0.2):
            self.stack.notes.append(
                f"t={self.stack.elapsed():.0f} s: the preferred election of {probe0} did not happen"
            )

    def _probe_full_broker(self) -> str:
        """While broker ``DISK_BROKER``'s log dir is full: produce once to each probe partition it leads
        (expecting KAFKA_STORAGE_ERROR), then read back from it the last records acknowledged before the
        fault of every partition it leads. Returns a summary; a failed check is a failure of the run."""
        import warnings  # noqa: PLC0415

        from kafka import KafkaProducer  # noqa: PLC0415
        from kafka.errors import KafkaError  # noqa: PLC0415

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from confluent_kafka import Consumer  # noqa: PLC0415
            from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: PLC0415
        assert self.stack.zk is not None
        admin = TopicAdmin(self.stack.zk)
        led = sorted(
            (topic, p)
            for topic in (*TOPICS, PROBE_TOPIC)
            for p, state in admin.describe_states(topic).items()
            if state.leader == DISK_BROKER
        )
        probe_led = [p for topic, p in led if topic == PROBE_TOPIC]
        # produce first: the failed append takes the partition's log offline, which reads must survive
        produced: list[str] = []
        producer = KafkaProducer(
            bootstrap_servers=self.stack.live_bootstrap().split(","),
            acks="all",
            retries=0,
            request_timeout_ms=10000,
        )
        try:
            for p in probe_led:
                try:
                    meta = producer.send(PROBE_TOPIC, value=PROBE_FULL_VALUE, partition=p).get(timeout=20)
                    leader = admin.describe_states(PROBE_TOPIC)[p].leader
                    produced.append(f"p{p} accepted at offset {meta.offset} by leader {leader}")
                    if leader == DISK_BROKER:
                        self.failures.append(
                            f"broker {DISK_BROKER} with a full log dir accepted a produce of "
                            f"{len(PROBE_FULL_VALUE)} bytes to {PROBE_TOPIC}-{p} (offset {meta.offset})"
                        )
                    else:
                        self.disk_full_produce_errors[f"moved to broker {leader}"] += 1
                except KafkaError as exc:
                    produced.append(f"p{p} refused: {type(exc).__name__}")
                    self.disk_full_produce_errors[type(exc).__name__] += 1
        finally:
            producer.close(timeout=10)
        # then read back the last (up to) PROBE_RECORDS acknowledged records of every partition it leads
        reads: list[str] = []
        consumer = Consumer(
            {
                "bootstrap.servers": self.stack.live_bootstrap(),
                "group.id": "chaos-disk-probe",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        try:
            for topic, p in led:
                low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)
                start = max(int(low), int(high) - PROBE_RECORDS)
                want = set(range(start, int(high)))
                consumer.assign([CkTopicPartition(topic, p, start)])
                got: set[int] = set()
                deadline = time.monotonic() + 20
                while want - got and time.monotonic() < deadline:
                    message = consumer.poll(1.0)
                    if message is not None and message.error() is None and message.partition() == p:
                        got.add(int(message.offset() or 0))
                reads.append(f"{topic}-{p} {len(want & got)}/{len(want)}")
                self.disk_full_reads[0] += len(want & got)
                self.disk_full_reads[1] += len(want)
                if want - got:
                    self.failures.append(
                        f"broker {DISK_BROKER} with a full log dir did not serve {topic}-{p} offsets "
                        f"{min(want - got)}..{max(want - got)} (read {len(want & got)} of {len(want)})"
                    )
                consumer.unassign()
        finally:
            consumer.close()
        return (
            f"leads {len(led)} partition(s); produce to the probe partitions it leads: "
            f"{', '.join(produced) or 'it leads none'}; read back from it: {', '.join(reads) or '-'}"
        )

    def fault_loop(self, slot: int, until_s: float, kinds: Sequence[str]) -> None:
        rng = random.Random(f"{self.seed}/{slot}")
        time.sleep(rng.uniform(5, 15) + slot * 10)
        while self.stack.elapsed() < until_s and not self.stop_faults.is_set():
            kind = rng.choice(kinds)
            try:
                fault = self.fault(kind, rng)
            except Exception as exc:
                fault = Fault(
                    kind, "?", self.stack.elapsed(), detail=f"{type(exc).__name__}: {exc}", ok=False
                )
            if fault is None:
                time.sleep(1)
                continue
            self.faults.append(fault)
            rec = "not recovered" if fault.recovery_s is None else f"recovered in {fault.recovery_s:.1f} s"
            say(f"fault {kind} on {fault.target}: held {fault.held_s:.1f} s, {rec}. {fault.detail}")
            time.sleep(rng.uniform(3, 12))
