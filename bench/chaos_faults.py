"""PURE COPY (adapted in the next commit): the faults of the chaos run."""

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
        return wait_for(lambda: bool(self.load_driver_pids()), bound_s, 0.2)

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
        hour = self.hour_s
        if kind in ("broker_kill", "broker_pause"):
            proc = self.procs[f"broker-{broker}"]
            fault = Fault(kind, proc.name, self.elapsed())
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
            self._recover(fault, lambda: self.broker_healthy(broker), since=heal)
            return fault
        if kind == "zookeeper_kill":
            proc = self.procs["zookeeper"]
            fault = Fault(kind, "zookeeper", self.elapsed())
            proc.kill9()
            fault.held_s = self._hold(2, 10)
            heal = time.monotonic()
            proc.start()
            self._recover(fault, self.cluster_healthy, 240, since=heal)
            return fault
        if kind in ("registry_kill", "registry_down_during_load"):
            proc = self.procs["registry"]
            sched_from = _file_size(self.procs["scheduler"].log_path)
            if kind == "registry_down_during_load" and not self._wait_for_planned(sched_from, 2 * hour + 30):
                return None
            fault = Fault(kind, "registry", self.elapsed())
            before = self.committed_loads()
            proc.kill9()
            # during a load: down long enough for the tasks to reach their first decode (a PySpark worker
            # starts in seconds on a loaded machine) and for Spark's retries of a failed one
            fault.held_s = self._hold(3, 15) if kind == "registry_kill" else self._hold(8, 20)
            heal = time.monotonic()
            proc.start()
            url = self.config.registry.url + "/subjects"
            if kind == "registry_kill":
                self._recover(fault, lambda: _http_ok(url), since=heal)
            else:
                self._recover(fault, self._load_committed_after(before), 6 * hour + 120, since=heal)
                fault.detail = "killed once the load's tasks ran; " + self._load_effects(sched_from)
            return fault
        if kind == "producer_kill":
            proc = self.procs[f"producer-{host}"]
            fault = Fault(kind, proc.name, self.elapsed())
            self.killed_instances.add(f"{host}-{self.producer_instances[host]}")
            proc.kill9()
            fault.held_s = self._hold(1, 8)
            self.producer_instances[host] += 1
            size = _file_size(self.ack_log(host))
            heal = time.monotonic()
            proc.start()
            self._recover(fault, lambda: _file_size(self.ack_log(host)) > size, since=heal)
            return fault
        if kind in ("consumer_kill", "consumer_pause"):
            name = self.rng.choice(sorted(READERS))
            _group, protocol, session_ms = READERS[name]
            proc = self.procs[name]
            reader_log = self.reader_out(name)
            fault = Fault(kind, f"{name} ({protocol} group)", self.elapsed())
            if kind == "consumer_kill":
                proc.kill9()
                fault.held_s = self._hold(1, 8)
                size = _file_size(reader_log)
                heal = time.monotonic()
                proc.start()
            else:
                proc.signal(signal.SIGSTOP)
                proc.stopped = True
                fault.held_s = self._hold(session_ms / 1000 + 2, session_ms / 1000 + 8)
                size = _file_size(reader_log)
                heal = time.monotonic()
                proc.signal(signal.SIGCONT)
                proc.stopped = False
                fault.detail = f"paused past its {session_ms} ms group session"
            healthy = lambda: self._reader_owns_all(name) and _file_size(reader_log) > size  # noqa: E731
            self._recover(fault, healthy, since=heal)
            return fault
        if kind == "mirror_kill":
            proc = self.procs["mirror"]
            fault = Fault(kind, "mirror", self.elapsed())
            self.mirror_kills += 1
            proc.kill9()
            fault.held_s = self._hold(1, 8)
            total = self._target_total()
            heal = time.monotonic()
            proc.start()
            self._recover(fault, lambda: self._target_total() > total, since=heal)
            return fault
        if kind in ("load_driver_kill", "spark_task_kill"):
            if not self._wait_for_load(2 * hour + 30):
                return None
            before = self.committed_loads()
            fault = Fault(kind, "load", self.elapsed())
            if kind == "load_driver_kill":
                time.sleep(rng.uniform(0, 5))
                pids = self.load_driver_pids()
            else:
                pids = []
                wait_for(lambda: bool(self.spark_worker_pids()), 60, 0.1)
                time.sleep(rng.uniform(0, 1))
                pids = self.spark_worker_pids()
            if not pids:
                return None
            victim = rng.choice(pids)
            fault.detail = f"kill -9 pid {victim} ({cmdline(victim)[:60]}...)"
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
            self._recover(fault, self._load_committed_after(before), 6 * hour + 120)
            return fault
        if kind in ("broker_disk_full", "warehouse_disk_full"):
            if not self.tmpfs_ok:
                return None
            if kind == "broker_disk_full":
                where = self.work / "live" / f"broker-{DISK_BROKER}" / "logs"
                fault = Fault(kind, f"broker-{DISK_BROKER}", self.elapsed())
            else:
                if not self._wait_for_load(2 * hour + 30):
                    return None
                where = self.work / "warehouse"
                fault = Fault(kind, "warehouse", self.elapsed())
            before = self.committed_loads()
            if kind == "broker_disk_full":
                self._elect_disk_broker()
            log_from = _file_size(self.procs[f"broker-{DISK_BROKER}"].log_path)
            filler = where / ".chaos-filler"
            with filler.open("wb") as out, contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * (1 << 20))
                    out.flush()
            filled = time.monotonic()
            failed = self.failed_loads()
            probes = self._probe_full_broker() if kind == "broker_disk_full" else ""
            if kind == "warehouse_disk_full":
                # full until the running load has ended (it must fail, having committed nothing)
                wait_for(lambda: not self.load_driver_pids(), 4 * hour + 120, 0.5)
            self._hold(5, 15)
            fault.held_s = time.monotonic() - filled
            heal = time.monotonic()
            filler.unlink()
            if kind == "broker_disk_full":
                proc = self.procs[f"broker-{DISK_BROKER}"]
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
                self._recover(fault, lambda: self.broker_healthy(DISK_BROKER), since=heal)
            else:
                outcome = "failed" if self.failed_loads() > failed else "did not fail"
                fault.detail = f"warehouse filled during a load, which {outcome}"
                self._recover(fault, self._load_committed_after(before), 6 * hour + 120, since=heal)
            return fault
        raise ValueError(kind)

    def _wait_for_planned(self, sched_from: int, bound_s: float) -> bool:
        """Wait until a load has planned (the driver's ``planned:`` line, passed on by the scheduler, after
        byte ``sched_from`` of its log) and Spark runs its first task: the registry is then needed by the
        tasks only (each Python worker fetches a writer schema once, when it decodes its first records)."""
        log_path = self.procs["scheduler"].log_path

        def tasks_run() -> bool:
            with log_path.open("rb") as log:
                log.seek(sched_from)
                text = log.read().decode(errors="replace")
            after = text.split("] planned: ", 1)
            if len(after) < 2 or not self.load_driver_pids():
                return False
            return any(int(m.group(1)) > 0 for m in re.finditer(r"tasks done \((\d+) running\)", after[1]))

        return wait_for(tasks_run, bound_s, 0.1)

    def _load_effects(self, sched_from: int) -> str:
        """What the load that planned after byte ``sched_from`` of the scheduler's log, and those after it,
        went through: Spark's failed task attempts (``Lost task`` in each run's Spark log: each was retried),
        failed runs (retried by the scheduler), quarantined rows."""
        text = self.procs["scheduler"].log_path.read_bytes().decode(errors="replace")
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
        assert self.zk is not None
        admin = TopicAdmin(self.zk)
        probe0 = TopicPartition(PROBE_TOPIC, 0)
        if admin.describe_states(PROBE_TOPIC)[0].leader == DISK_BROKER:
            return
        with contextlib.suppress(Exception):  # a pending election: the wait below still tells
            admin.request_preferred_election([probe0])
        if not wait_for(lambda: admin.describe_states(PROBE_TOPIC)[0].leader == DISK_BROKER, 20, 0.2):
            self.notes.append(f"t={self.elapsed():.0f} s: the preferred election of {probe0} did not happen")

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
        assert self.zk is not None
        admin = TopicAdmin(self.zk)
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
            bootstrap_servers=self.live_bootstrap().split(","),
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
                "bootstrap.servers": self.live_bootstrap(),
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
        rng = random.Random(f"{self.args.seed}/{slot}")
        time.sleep(rng.uniform(5, 15) + slot * 10)
        while self.elapsed() < until_s and not self.stop_faults.is_set():
            kind = rng.choice(kinds)
            try:
                fault = self.fault(kind, rng)
            except Exception as exc:
                fault = Fault(kind, "?", self.elapsed(), detail=f"{type(exc).__name__}: {exc}", ok=False)
            if fault is None:
                time.sleep(1)
                continue
            self.faults.append(fault)
            rec = "not recovered" if fault.recovery_s is None else f"recovered in {fault.recovery_s:.1f} s"
            say(f"fault {kind} on {fault.target}: held {fault.held_s:.1f} s, {rec}. {fault.detail}")
            time.sleep(rng.uniform(3, 12))

