"""The report of the chaos run (:mod:`bench.chaos`): every fault with its recovery time, the faults by kind,
the loads, the warehouse and audit totals of the oracle, the notes and failures; printed, and written to
``report.json`` in the work dir (``tests/bench/test_chaos.py`` reads it).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter, defaultdict

from bench.chaos_common import DISK_BROKER, Fault, say
from bench.chaos_faults import FAULT_KINDS, FaultInjector
from bench.chaos_oracle import ChaosOracle
from bench.chaos_stack import ChaosStack


def report(stack: ChaosStack, injector: FaultInjector, oracle: ChaosOracle, failures: list[str]) -> int:
    """Print the report (every fault with its recovery time, the loads, the audit's totals, the oracle's
    checks), write it to ``report.json`` in the work dir; 0 if ``failures`` is empty (after adding the
    faults that did not recover), else 1."""
    say()
    say(
        f"=== chaos report: seed {stack.args.seed}, {stack.args.minutes} min of faults, "
        f"virtual hour = {stack.hour_s:.0f} s ==="
    )
    by_kind: dict[str, list[Fault]] = defaultdict(list)
    for fault in injector.faults:
        by_kind[fault.kind].append(fault)
        rec = "-" if fault.recovery_s is None else f"{fault.recovery_s:6.1f} s"
        say(
            f"  t={fault.started_s:6.1f} s  {fault.kind:<26} {fault.target:<18} "
            f"held {fault.held_s:5.1f} s  recovery {rec}  {fault.detail}"
        )
        if not fault.ok:
            failures.append(
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
    history = stack.schedule_state().get("history", [])
    loads = Counter(h.get("status") for h in history)
    say(
        f"  scheduled loads: {dict(loads)} (last {len(history)} runs), "
        f"last loaded until {stack.schedule_state().get('loaded_until')}"
    )
    say(
        f"  registry down during loads: {injector.registry_task_failures} failed task attempt(s), "
        f"{injector.registry_failed_runs} failed run(s) in those loads; broker {DISK_BROKER} full: produces "
        f"refused {dict(injector.disk_full_produce_errors)}, "
        f"records read back {injector.disk_full_reads[0]}/{injector.disk_full_reads[1]}"
    )
    say(f"  warehouse (DuckDB) vs the producers' logs: {oracle.warehouse_summary}")
    say(f"  audit, producer -> load (live):    {oracle.audit_live}")
    say(f"  audit, producer -> mirror (target): {oracle.audit_target}")
    for note in stack.notes:
        say(f"  note: {note}")
    result = {
        "seed": stack.args.seed,
        "minutes": stack.args.minutes,
        "hour_s": stack.hour_s,
        "faults": [dataclasses.asdict(f) for f in injector.faults],
        "by_kind": summary,
        "loads": dict(loads),
        "registry_down_task_failures": injector.registry_task_failures,
        "registry_down_failed_runs": injector.registry_failed_runs,
        "disk_full_produce_errors": dict(injector.disk_full_produce_errors),
        "disk_full_reads": injector.disk_full_reads,
        "warehouse": oracle.warehouse_summary,
        "audit_live": oracle.audit_live,
        "audit_target": oracle.audit_target,
        "notes": stack.notes,
        "failures": failures,
    }
    (stack.work / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    if failures:
        say(f"FAILED: {len(failures)} problem(s):")
        for failure in failures:
            say(f"  - {failure}")
        return 1
    not_counted = oracle.audit_live["in_flight_not_counted"]
    say(
        "OK: nothing acknowledged was lost or duplicated (warehouse, consumer groups, mirror offsets); "
        "the audit's producer tier counted every logged acknowledgement exactly, and the mirror tier "
        f"equals the warehouse in every window after {injector.mirror_kills} mirror kill -9(s)"
        + (
            f"; {not_counted} rows in flight at a producer kill -9 (acknowledged by the broker, not to "
            "the producer) are loaded and not counted by the producer tier"
            if not_counted
            else ""
        )
    )
    return 0
