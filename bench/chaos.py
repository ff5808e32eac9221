"""The chaos run (issue 24): the whole pipeline under random faults, with the audit as the oracle.

Run from the repository root (root is needed for the full-disk faults' tmpfs; without it they are skipped
and the report says so)::

    .venv/bin/python bench/chaos.py --minutes 3 --seed 7     # 3 minutes of faults, then the oracle
    .venv/bin/python bench/chaos.py --minutes 30 --seed 2026 --hour 2m

It prints a report (every fault with its recovery time, the loads, the audit's totals, the oracle's
checks) and exits 0 only if nothing acknowledged was lost or duplicated; 1 otherwise.

**The system under test**, every process started here on 127.0.0.1 and stopped here by pid:

* the *live* cluster: ZooKeeper, three brokers and the schema registry (``lumber dev up``'s stack,
  :class:`lumber.dev.dev_stack.DevStack`), topics ``page_view`` and ``click`` (3 partitions, replication
  factor 3, ``min.insync.replicas=2``) and ``_audit``;
* four producers (``bench/chaos_roles.py producer``: audited, idempotent, ``acks=all``, each with its own
  log of what it was acknowledged);
* two consumer groups of Lumber's ``GroupConsumer`` (``bench/chaos_roles.py consumer``), each in a process
  of its own reading both topics and logging every offset it read: a ZooKeeper group (the paper's) and a
  Kafka-protocol group (``[group] protocol = "kafka"``: JoinGroup / SyncGroup / OffsetCommit through the
  brokers' group coordinator and ``__consumer_offsets``, RF 3);
* the hourly load: ``lumber etl schedule``'s :class:`~pipeline.scheduler.Scheduler` with its production
  runner (one ``spark-submit`` per hour, ``local[2,4]``: task attempts are retried) on a *virtual clock*
  whose hour lasts ``--hour`` of wall time (``bench/chaos_roles.py`` explains it: the producers stamp
  their records with the same clock, so every load cuts at a whole hour of record time, as in production);
* the mirror (``lumber mirror``) to a second cluster (ZooKeeper, one broker, a registry of its own which
  nothing uses: the audit events use the live one), copying ``page_view``, ``click`` and ``_audit``.

**Faults**, drawn from a seeded schedule (``--seed``), at most ``--concurrent`` (2) at a time, each healed
after a random interval (a kind needing a running load waits for one, bounded): ``kill -9`` of a broker,
the registry, a producer, the consumer, the mirror, the load's driver (the Python driver of the running
``spark-submit``) or a Spark task (a PySpark worker); ``SIGSTOP`` of a broker or of the consumer past its
ZooKeeper session, then ``SIGCONT``; ZooKeeper ``kill -9``-ed and restarted; a full disk (broker 2's log
dir and the warehouse are each a small tmpfs; the fault fills it, then frees it; the broker, whose log
goes offline after a failed write as Kafka's log dir does, is restarted; while its log dir is full, the run
first makes it the leader of ``chaos-probe``-0 (a topic only these probes use; broker 2 is that
partition's preferred replica), produces 64 KiB once to each ``chaos-probe`` partition it leads, which
must be refused (KAFKA_STORAGE_ERROR) unless its leadership has moved, then reads back from it the last
records acknowledged before the fault of every partition it leads, which must all come back); and the
registry killed for 8-20 s while a load's tasks run (once the driver has printed ``planned:`` and Spark
runs a task: the driver resolves the schemas while planning, the tasks fetch each writer schema once per
Python worker; the fault's line counts the load's failed task attempts, which Spark retried, the
scheduler's failed runs, and the quarantined rows, which the oracle requires to be 0). The recovery time
of a fault is measured from its healing step (restart, SIGCONT, space freed) until the part is healthy
again: a broker back in every ISR, ZooKeeper with all brokers registered and every partition led with
an ISR of 2 or more, the registry answering, a producer's or the consumer's log growing again, the
mirror's target log ends growing, a load committed.

**The oracle**, once the faults are over and healed: the producers stop (a clean close publishes their
last audit counts); the consumer and the mirror must reach the source log ends; the scheduler stops and
one last ``lumber etl run`` loads everything; then

1. ``lumber audit verify --json`` over every virtual hour of the run: for every topic and window,
   ``missing`` = 0, and the producer tier is exact: the producers journal their counts (``[audit]
   state_dir``, the persistent outbox: a restarted producer publishes what its killed predecessor had not),
   so the producer tier counts at least every record the producers logged as acknowledged, and at most
   those plus the rows of records *in flight at a kill* (in the warehouse, acknowledged by the broker, but
   the producer died before its log line: counted if the kill came after the journal's line). ``duplicate``
   (loaded - expected) may only be such rows: any other surplus or shortfall fails the run;
2. against the mirror's target: the mirror tier (each source offset counted once, journaled too, so exact
   across mirror kills) equals the warehouse rows, i.e. the source records, for every window; the target
   holds the records copied again after a mirror kill twice, which the tier does not count (the mirror
   logs how many it knew of);
3. DuckDB over the warehouse: no ``event_id`` twice; every record a producer logged as acknowledged is
   there; every row that no producer logged was sent by an instance that was killed (in flight at the
   kill); as many rows as the source topics hold; nothing quarantined;
4. each consumer group (ZooKeeper and Kafka-protocol) read every offset of every partition up to the log
   end, and the mirror's group committed the source log ends of every partition (``_audit`` included).

The report's ``t=`` is seconds since the run started (setup included); ``report.json`` in the work dir
holds all of it.

Layout (as :mod:`bench.paper` is split):

* :mod:`bench.chaos_common`: the settings (topics, brokers, groups, the probes' topic), small helpers
  (``say``, ``wait_for``, free ports) and :class:`~bench.chaos_common.Fault`, one fault as reported;
* :mod:`bench.chaos_process`: :class:`~bench.chaos_process.Proc`, a process of the run, and the ``/proc``
  reads that find a load's driver and Spark workers;
* :mod:`bench.chaos_stack`: :class:`~bench.chaos_stack.ChaosStack`, the system under test: setup, the
  processes, the virtual clock, the health checks;
* :mod:`bench.chaos_faults`: :class:`~bench.chaos_faults.FaultInjector`, the fault kinds, their injection,
  healing and recovery times, the full-disk probes;
* :mod:`bench.chaos_oracle`: :class:`~bench.chaos_oracle.ChaosOracle`, the checks 1 to 3 above;
* :mod:`bench.chaos_report`: the report, printed and as ``report.json``;
* here: :class:`ChaosRun` (the run, its end and check 4) and ``main``; the processes that are not Lumber
  commands are in ``bench/chaos_roles.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.chaos_common import PRODUCERS, PY, READERS, say, wait_for  # noqa: E402
from bench.chaos_faults import FAULT_KINDS, FaultInjector  # noqa: E402
from bench.chaos_oracle import ChaosOracle  # noqa: E402
from bench.chaos_report import report  # noqa: E402
from bench.chaos_stack import ChaosStack  # noqa: E402
from broker.client.groups.zookeeper.group_offsets import GroupOffsets  # noqa: E402
from broker.record.topic_partition import TopicPartition  # noqa: E402


class ChaosRun:
    """One chaos run: the system under test (:class:`~bench.chaos_stack.ChaosStack`), the faults injected
    into it (:class:`~bench.chaos_faults.FaultInjector`, in ``--concurrent`` threads), then the end of the
    run (every process up, the producers stopped, the readers and the mirror caught up, the last load), the
    oracle (:class:`~bench.chaos_oracle.ChaosOracle`) and the report (:func:`~bench.chaos_report.report`).
    ``failures`` is shared by all of them: what any part found wrong."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.failures: list[str] = []
        self.stack = ChaosStack(args, work)
        self.injector = FaultInjector(self.stack, args.seed, self.failures)
        self.oracle = ChaosOracle(self.stack, self.failures)

    # -- the run ----------------------------------------------------------------------------------------

    def run(self) -> int:
        self.stack.setup()
        kinds = [k for k in self.args.faults.split(",") if k]
        if not self.stack.tmpfs_ok:
            kinds = [k for k in kinds if not k.endswith("disk_full")]
        # the fault period starts now, after the stacks are up: their start-up (a minute on a loaded
        # machine) must not eat into it, or a short run draws fewer faults than it promises
        fault_until = self.stack.elapsed() + self.args.minutes * 60
        say(f"faults for {self.args.minutes} min: {', '.join(kinds)}")
        threads = [
            threading.Thread(target=self.injector.fault_loop, args=(slot, fault_until, kinds), daemon=True)
            for slot in range(self.args.concurrent)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(0.0, fault_until - self.stack.elapsed()) + 900)
            if thread.is_alive():
                self.failures.append("a fault did not finish within 15 minutes after the fault period")
        return self.finish()

    def finish(self) -> int:
        say("faults over; checking every process is up")
        for name, proc in self.stack.procs.items():
            if not proc.running():
                self.failures.append(f"{name} was not running at the end of the fault period")
                with contextlib.suppress(Exception):
                    proc.start()
        if not wait_for(self.stack.cluster_healthy, 120):
            self.failures.append("the live cluster did not become healthy after the faults")
        say("stopping the producers (a clean close publishes their last audit counts)")
        for n in range(1, PRODUCERS + 1):
            self.stack.procs[f"producer-app-{n}"].terminate(120)
        self.end_virtual_ms = self.stack.virtual_now_ms()
        ends = self.stack.stable_log_ends()
        say(f"source log ends: {sum(ends.values())} records")
        for name, (group, protocol, _session_ms) in READERS.items():
            if not wait_for(lambda name=name: self._reader_caught_up(name, ends), 180, 1):  # type: ignore[misc]
                self.failures.append(
                    f"the {protocol} consumer group {group} did not read every offset: {self.consumer_gaps}"
                )
        audit_topic = self.stack.config.audit.topic
        with_audit = {**ends, **self.stack.log_ends(self.stack.live_bootstrap(), (audit_topic,))}
        if not wait_for(lambda: self._group_caught_up(self.stack.mirror_group, with_audit), 180, 1):
            self.failures.append(f"the mirror's group did not commit the source log ends: {self.group_lag}")
        time.sleep(5)  # the mirror's last audit interval
        say("stopping the scheduler; the last load")
        self.stack.procs["scheduler"].terminate(300)
        code = subprocess.run(
            [PY, "-m", "lumber", "--config", str(self.stack.config_path), "etl", "run"],
            stdout=(self.work / "logs" / "final-load.log").open("w"),
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
        if code != 0:
            self.failures.append(
                f"the final load failed (exit {code}; {self.work / 'logs' / 'final-load.log'})"
            )
        for name in READERS:
            self.stack.procs[name].terminate()
        self.stack.procs["mirror"].terminate()
        final = self.stack.stable_log_ends()
        if final != ends:
            self.failures.append(f"the source log ends moved after the producers stopped: {ends} -> {final}")
        self.oracle.check(final, self.end_virtual_ms, self.injector.killed_instances)
        return report(self.stack, self.injector, self.oracle, self.failures)

    def _group_caught_up(self, group: str, ends: dict[tuple[str, int], int]) -> bool:
        assert self.stack.zk is not None
        read = GroupOffsets(self.stack.zk, group).read([TopicPartition(t, p) for t, p in ends])
        committed = {(tp.topic, tp.partition): (None if c is None else c.offset) for tp, c in read.items()}
        self.group_lag = {tp: (committed[tp], end) for tp, end in ends.items() if (committed[tp] or 0) < end}
        return not self.group_lag

    def _reader_caught_up(self, name: str, ends: dict[tuple[str, int], int]) -> bool:
        seen: dict[tuple[str, int], set[int]] = defaultdict(set)
        for line in self.stack.reader_out(name).read_text().splitlines():
            topic, partition, offset = line.split()
            seen[(topic, int(partition))].add(int(offset))
        self.consumer_gaps = {tp: end - len(seen[tp]) for tp, end in ends.items() if len(seen[tp]) != end}
        return not self.consumer_gaps

    def teardown(self) -> None:
        self.stack.teardown()


def parse_duration_s(text: str) -> float:
    from pipeline.durations import parse_duration_ms  # noqa: PLC0415

    return parse_duration_ms(text, "--hour") / 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the chaos run (issue 24)")
    parser.add_argument("--minutes", type=float, default=3.0, help="how long faults are injected")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--hour", default="2m", help="wall time of one virtual hour (default 2m)")
    parser.add_argument("--rate", type=float, default=15.0, help="records per second per producer")
    parser.add_argument("--concurrent", type=int, default=2, help="faults at a time (1 or 2)")
    parser.add_argument("--faults", default=",".join(FAULT_KINDS), help="kinds to draw from")
    parser.add_argument("--work-dir", type=Path, help="keep everything here (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    args.hour_s = parse_duration_s(args.hour)
    unknown = set(args.faults.split(",")) - set(FAULT_KINDS) - {""}
    if unknown:
        parser.error(f"unknown fault kinds: {', '.join(sorted(unknown))}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(
        logging.CRITICAL
    )  # its reconnects while ZooKeeper is down are the fault
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="lumber-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    say(f"chaos run in {work}")
    run = ChaosRun(args, work)
    try:
        return run.run()
    finally:
        run.teardown()
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
