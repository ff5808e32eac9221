"""``lumber log verify``: walk partition files, report damage (``kafka-dump-log --deep-iteration``).

    lumber log verify events                       every partition of events in [log] log_dirs
    lumber log verify events --partition 3 --log-dir /var/lumber/logs
    lumber log verify events --json

Every batch's CRC and every record's framing is checked with the broker's own validator, and the
``.index`` and ``.timeindex`` files against the log (:mod:`broker.log.log_verifier`). Each damaged place is
printed with its file, byte position and offset. Run it on a stopped broker's log dirs (on a running one the
active segments change under the walk); ``lumber broker start --verify-logs`` runs the same walk over every
partition before serving. Exit codes: 0 no damage, 1 damage found, 2 no such partition in the log dirs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.log.log_verifier import PartitionReport
    from lumber.config import LumberConfig

DAMAGE_EXIT_CODE = 1
NOT_FOUND_EXIT_CODE = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("log", help="inspect a broker's partition files")
    sub = parser.add_subparsers(metavar="ACTION", required=True)
    verify = sub.add_parser(
        "verify", help="check every batch, record and index of a topic's partitions; report damage"
    )
    verify.add_argument("topic")
    verify.add_argument("--partition", type=int, help="only this partition (default: every one found)")
    verify.add_argument(
        "--log-dir", action="append", dest="log_dirs", help="a log dir (repeatable; default: [log] log_dirs)"
    )
    verify.add_argument("--json", action="store_true", help="print one JSON object per partition")
    verify.set_defaults(handler=_verify)


def verify_log_dirs(
    log_dirs: list[Path], topic: str | None = None, partition: int | None = None
) -> list[PartitionReport]:
    """Verify the partitions of ``topic`` (every topic if None) found in ``log_dirs``."""
    from broker.log.log_verifier import find_partition_dirs, verify_partition

    return [verify_partition(directory) for directory in find_partition_dirs(log_dirs, topic, partition)]


def describe(report: PartitionReport) -> list[str]:
    """One summary line for ``report``, then one line per damaged place, then one per warning."""
    state = "ok" if report.ok else f"{len(report.damage)} damaged place(s)"
    summary = (
        f"{report.directory}: {report.segments} segment(s), {report.batches} batch(es), {report.records} "
        f"record(s), next offset {report.next_offset}: {state}"
    )
    lines = [summary]
    lines.extend(f"  DAMAGE {damage}" for damage in report.damage)
    lines.extend(f"  WARNING {empty}: only emptied batches" for empty in report.empty_segments)
    return lines


def _verify(args: argparse.Namespace, config: LumberConfig) -> int:
    log_dirs = [Path(d) for d in (args.log_dirs or config.log.log_dirs)]
    reports = verify_log_dirs(log_dirs, args.topic, args.partition)
    if not reports:
        which = args.topic if args.partition is None else f"{args.topic}-{args.partition}"
        print(f"lumber: no partition of {which} in {', '.join(str(d) for d in log_dirs)}", file=sys.stderr)
        return NOT_FOUND_EXIT_CODE
    for report in reports:
        if args.json:
            print(json.dumps(_as_json(report)))
        else:
            print("\n".join(describe(report)))
    return 0 if all(report.ok for report in reports) else DAMAGE_EXIT_CODE


def _as_json(report: PartitionReport) -> dict[str, Any]:
    return {
        "directory": str(report.directory),
        "segments": report.segments,
        "batches": report.batches,
        "records": report.records,
        "next_offset": report.next_offset,
        "ok": report.ok,
        "damage": [
            {"file": str(d.file), "position": d.position, "offset": d.offset, "reason": d.reason}
            for d in report.damage
        ],
        "empty_segments": [
            {"file": str(e.file), "base_offset": e.base_offset, "batches": e.batches}
            for e in report.empty_segments
        ],
    }
