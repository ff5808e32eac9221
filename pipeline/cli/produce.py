"""``lumber produce TOPIC``: send the lines of stdin to a topic, one record per line.

With ``--key-separator SEP`` (e.g. ``TAB``) a line ``key<SEP>value`` gives the record that key; a line
without the separator has a null key. Settings come from ``[producer]`` (the cluster from
``bootstrap_servers``, else ZooKeeper's ``[zookeeper] connect``); the options override them. Exit code 0
when every line was acknowledged, 1 when any failed (each failure on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from broker.client.console import produce_lines
from broker.client.producer import Producer
from pipeline.config import LumberConfig

#: Names accepted for separators that are awkward to type in a shell.
SEPARATOR_NAMES = {"TAB": "\t", "SPACE": " ", "COMMA": ",", "PIPE": "|"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("produce", help="send the lines of stdin to a topic, one record per line")
    parser.add_argument("topic")
    parser.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line into key SEP value (TAB, SPACE, COMMA, PIPE or a literal string)",
    )
    parser.add_argument("--partition", type=int, help="send every record to this partition")
    parser.add_argument(
        "--acks",
        choices=("0", "1", "all"),
        help="acknowledgements (default: [producer] acks); 0 or 1 turns the idempotent producer off",
    )
    parser.add_argument(
        "--compression",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="batch codec (default: [producer] compression_type)",
    )
    parser.add_argument(
        "--bootstrap-server",
        action="append",
        metavar="HOST:PORT",
        help="broker to learn the cluster from (repeatable; default: [producer] bootstrap_servers, else "
        "ZooKeeper)",
    )
    parser.set_defaults(handler=_produce)


def separator(name: str) -> str:
    """A ``--key-separator`` value: a name from :data:`SEPARATOR_NAMES` or the literal string."""
    return SEPARATOR_NAMES.get(name.upper(), name)


def _produce(args: argparse.Namespace, config: LumberConfig) -> int:
    settings = config.producer
    if args.acks is not None:
        # idempotence needs acks=all: asking for less on the command line turns it off (as Kafka's
        # producer does when acks is set and enable.idempotence is not)
        settings = dataclasses.replace(
            settings, acks=args.acks, enable_idempotence=settings.enable_idempotence and args.acks == "all"
        )
    if args.compression is not None:
        settings = dataclasses.replace(settings, compression_type=args.compression)
    if args.bootstrap_server:
        settings = dataclasses.replace(settings, bootstrap_servers=list(args.bootstrap_server))
    key_separator = separator(args.key_separator).encode("utf-8") if args.key_separator else None
    zookeeper = None if settings.bootstrap_servers else config.zookeeper.connect

    def report(error: BaseException) -> None:
        print(f"lumber: delivery failed: {error}", file=sys.stderr)

    with Producer(settings, zookeeper_connect=zookeeper) as producer:
        summary = produce_lines(
            producer,
            args.topic,
            sys.stdin.buffer,
            key_separator=key_separator,
            partition=args.partition,
            on_error=report,
        )
    print(f"lumber: sent {summary.sent} records to {args.topic}, {summary.failed} failed", file=sys.stderr)
    return 1 if summary.failed else 0
