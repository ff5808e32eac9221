"""``--throttle RATE``: the replication throttle of a command that copies partitions (``lumber cluster
reassign|rebalance|decommission``, ``lumber topics alter``), in bytes/s with a binary unit
(``1048576``, ``512k``, ``10m``). A light helper (the rules in :mod:`lumber.cli`):
``lumber topics`` declares the option without importing ``lumber cluster``'s module."""

from __future__ import annotations

import argparse


def add_throttle_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--throttle",
        type=parse_rate,
        metavar="RATE",
        help="limit the copy to RATE bytes/s (e.g. 1048576, 512k, 10m): Kafka's "
        "leader/follower.replication.throttled.rate on the brokers involved, removed once the moves are "
        "done (by --verify, or by the command that waits)",
    )


def parse_rate(text: str) -> int:
    units = {"": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}
    number = text.strip().lower().rstrip("/s")
    digits = number.rstrip("kmib")
    unit = number[len(digits) :]
    if not digits.isdigit() or unit not in units or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate in bytes/s (e.g. 1048576, 512k, 10m)")
    return int(digits) * units[unit]
