"""``lumber consume TOPIC``: print a topic's records, one line each.

By default every partition is read from its end (only new records) until interrupted; ``--from-beginning``
starts at the log start, ``--offset N`` at offset N (of ``--partition P``, or of every partition).
``--max N`` stops after N records and ``--timeout-ms T`` once T ms pass without one. Settings come from
``[consumer]`` (the cluster from ``bootstrap_servers``, else ZooKeeper's ``[zookeeper] connect``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from broker.client.console import consume_to
from broker.client.consumer import Consumer
from broker.client.errors import UnknownPartitionError
from broker.log.topic_partition import TopicPartition
from pipeline.cli.produce import separator
from pipeline.config import LumberConfig


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("consume", help="print a topic's records, one line per record")
    parser.add_argument("topic")
    parser.add_argument("--partition", type=int, help="read only this partition (default: all)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument("--offset", type=int, help="start at this offset")
    parser.add_argument("--max", type=int, dest="max_messages", metavar="N", help="stop after N records")
    parser.add_argument(
        "--timeout-ms", type=int, help="stop once this long passes without a record (default: never)"
    )
    parser.add_argument("--print-key", action="store_true", help="print key SEP value")
    parser.add_argument("--print-offset", action="store_true", help="print partition SEP offset SEP first")
    parser.add_argument(
        "--separator", default="TAB", help="what --print-key/--print-offset put between fields"
    )
    parser.add_argument(
        "--bootstrap-server",
        action="append",
        metavar="HOST:PORT",
        help="broker to learn the cluster from (repeatable; default: [consumer] bootstrap_servers, else "
        "ZooKeeper)",
    )
    parser.set_defaults(handler=_consume)


def _consume(args: argparse.Namespace, config: LumberConfig) -> int:
    settings = config.consumer
    if args.bootstrap_server:
        settings = dataclasses.replace(settings, bootstrap_servers=list(args.bootstrap_server))
    settings = dataclasses.replace(
        settings, auto_offset_reset="smallest" if args.from_beginning else "largest"
    )
    zookeeper = None if settings.bootstrap_servers else config.zookeeper.connect
    with Consumer(settings, zookeeper_connect=zookeeper) as consumer:
        partitions = consumer.partitions_for(args.topic)
        if args.partition is not None:
            if not 0 <= args.partition < len(partitions):
                raise UnknownPartitionError(args.topic, args.partition, len(partitions))
            partitions = [TopicPartition(args.topic, args.partition)]
        consumer.assign(partitions)
        if args.offset is not None:
            for tp in partitions:
                consumer.seek(tp, args.offset)
        count = consume_to(
            consumer,
            sys.stdout.buffer,
            max_messages=args.max_messages,
            timeout_ms=args.timeout_ms,
            print_key=args.print_key,
            print_offset=args.print_offset,
            separator=separator(args.separator).encode("utf-8"),
        )
    print(f"lumber: consumed {count} records from {args.topic}", file=sys.stderr)
    return 0
