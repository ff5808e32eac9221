"""PURE COPY (adapted in the next commit): the report of the chaos run."""

    # -- report -------------------------------------------------------------------------------------------

    def report(self) -> int:
        say()
        say(
            f"=== chaos report: seed {self.args.seed}, {self.args.minutes} min of faults, "
            f"virtual hour = {self.hour_s:.0f} s ==="
        )
        by_kind: dict[str, list[Fault]] = defaultdict(list)
        for fault in self.faults:
            by_kind[fault.kind].append(fault)
            rec = "-" if fault.recovery_s is None else f"{fault.recovery_s:6.1f} s"
            say(
                f"  t={fault.started_s:6.1f} s  {fault.kind:<26} {fault.target:<18} "
                f"held {fault.held_s:5.1f} s  recovery {rec}  {fault.detail}"
            )
            if not fault.ok:
                self.failures.append(
                    f"fault {fault.kind} on {fault.target} at t={fault.started_s:.0f} s: {fault.detail}"
                )
        say("  by kind (count, recovery median / max):")
        summary = {}
        for kind in FAULT_KINDS:
            faults = by_kind.get(kind, [])
            times = [f.recovery_s for f in faults if f.recovery_s is not None]
            summary[kind] = {
                "count": len(faults),
                "recovery_median_s": round(statistics.median(times), 1) if times else None,
                "recovery_max_s": round(max(times), 1) if times else None,
            }
            if faults:
                say(
                    f"    {kind:<26} {len(faults):3d}   {summary[kind]['recovery_median_s']} s / "
                    f"{summary[kind]['recovery_max_s']} s"
                )
        history = self.schedule_state().get("history", [])
        loads = Counter(h.get("status") for h in history)
        say(
            f"  scheduled loads: {dict(loads)} (last {len(history)} runs), "
            f"last loaded until {self.schedule_state().get('loaded_until')}"
        )
        say(
            f"  registry down during loads: {self.registry_task_failures} failed task attempt(s), "
            f"{self.registry_failed_runs} failed run(s) in those loads; broker {DISK_BROKER} full: produces "
            f"refused {dict(self.disk_full_produce_errors)}, "
            f"records read back {self.disk_full_reads[0]}/{self.disk_full_reads[1]}"
        )
        say(f"  warehouse (DuckDB) vs the producers' logs: {self.warehouse_summary}")
        say(f"  audit, producer -> load (live):    {self.audit_live}")
        say(f"  audit, producer -> mirror (target): {self.audit_target}")
        for note in self.notes:
            say(f"  note: {note}")
        result = {
            "seed": self.args.seed,
            "minutes": self.args.minutes,
            "hour_s": self.hour_s,
            "faults": [dataclasses.asdict(f) for f in self.faults],
            "by_kind": summary,
            "loads": dict(loads),
            "registry_down_task_failures": self.registry_task_failures,
            "registry_down_failed_runs": self.registry_failed_runs,
            "disk_full_produce_errors": dict(self.disk_full_produce_errors),
            "disk_full_reads": self.disk_full_reads,
            "warehouse": self.warehouse_summary,
            "audit_live": self.audit_live,
            "audit_target": self.audit_target,
            "notes": self.notes,
            "failures": self.failures,
        }
        (self.work / "report.json").write_text(json.dumps(result, indent=2) + "\n")
        if self.failures:
            say(f"FAILED: {len(self.failures)} problem(s):")
            for failure in self.failures:
                say(f"  - {failure}")
            return 1
        not_counted = self.audit_live["in_flight_not_counted"]
        say(
            "OK: nothing acknowledged was lost or duplicated (warehouse, consumer groups, mirror offsets); "
            "the audit's producer tier counted every logged acknowledgement exactly, and the mirror tier "
            f"equals the warehouse in every window after {self.mirror_kills} mirror kill -9(s)"
            + (
                f"; {not_counted} rows in flight at a producer kill -9 (acknowledged by the broker, not to "
                "the producer) are loaded and not counted by the producer tier"
                if not_counted
                else ""
            )
        )
        return 0
