"""``lumber consume TOPIC``: print a topic's records, one line each (:mod:`lumber.cli.record_format`).

By default every partition is read from its end (only new records) until interrupted; ``--from-beginning``
starts at the log start, ``--offset N`` at offset N (of ``--partition P``, or of every partition).
``--max N`` stops after N records and ``--timeout-ms T`` once T ms pass without one (T also bounds the wait
for the topic's metadata). A topic that does not exist is an error at once. Values (and keys) that are
Confluent-framed Avro with a schema id the registry knows are printed as Avro JSON, like
``kafka-avro-console-consumer`` prints them; ``--value-format`` / ``--key-format`` choose ``avro``,
``json``, ``raw`` or ``hex`` instead. Settings come from ``[consumer]`` (the cluster from
``bootstrap_servers``, else ZooKeeper's ``[zookeeper] connect``); the registry is ``--registry-url``, else
``[registry] url``. The record count goes to the log (``-v``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from broker.client.consumer.consumer import Consumer
from broker.client.errors import UnknownPartitionError
from broker.record.topic_partition import TopicPartition
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.console_tools import consume_to
from lumber.cli.invocation import suggest
from lumber.cli.produce import separator
from lumber.cli.record_format import AvroText, Format, RecordPrinter
from lumber.cli.topic_check import require_topic
from lumber.config import LumberConfig
from pipeline.durations import DURATION_HELP, DurationAction
from schemas.client import SchemaRegistryClient

log = logging.getLogger(__name__)

FORMATS = [f.value for f in Format]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("consume", help="print a topic's records, one line per record")
    parser.add_argument("topic")
    parser.add_argument("--partition", type=int, help="read only this partition (default: all)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument("--offset", type=int, help="start at this offset")
    parser.add_argument("--max", type=int, dest="max_messages", metavar="N", help="stop after N records")
    parser.add_argument(
        "--timeout",
        "--timeout-ms",
        dest="timeout_ms",
        action=DurationAction,
        metavar="DURATION",
        help=f"stop once this long passes without a record, {DURATION_HELP} (--timeout-ms: an integer of "
        "ms); also the longest wait for the topic's metadata (default: never; the metadata: [consumer] "
        "request_timeout_ms)",
    )
    parser.add_argument(
        "--value-format",
        choices=FORMATS,
        default=Format.AUTO.value,
        help="how to print values: avro (Confluent-framed, decoded through the registry, as Avro JSON), "
        "json, raw (UTF-8, unprintable characters escaped), hex; auto (default): avro when the value is "
        "framed with a schema id the registry knows, else raw",
    )
    parser.add_argument(
        "--key-format",
        choices=FORMATS,
        default=Format.AUTO.value,
        help="how to print keys (as --value-format)",
    )
    parser.add_argument("--print-key", action="store_true", help="print key SEP value")
    parser.add_argument("--print-offset", action="store_true", help="print partition SEP offset SEP first")
    parser.add_argument(
        "--print-headers", action="store_true", help="print name:value,... (or NO_HEADERS) SEP before the key"
    )
    parser.add_argument(
        "--print-timestamp", action="store_true", help="print CreateTime:<ms> SEP (or LogAppendTime) first"
    )
    parser.add_argument(
        "--separator", default="TAB", help="what goes between the printed fields (default: TAB)"
    )
    add_cluster_options(parser)
    parser.add_argument("--registry-url", metavar="URL", help="schema registry (default: [registry] url)")
    parser.set_defaults(handler=_consume)


def _consume(args: argparse.Namespace, config: LumberConfig) -> int:
    settings = config.consumer
    if args.bootstrap_server:
        settings = settings.replace(bootstrap_servers=list(args.bootstrap_server))
    settings = settings.replace(auto_offset_reset="earliest" if args.from_beginning else "latest")
    metadata_wait_ms = settings.request_timeout_ms
    if args.timeout_ms is not None and args.timeout_ms >= 0:
        metadata_wait_ms = min(metadata_wait_ms, args.timeout_ms)
    zookeeper = None if settings.bootstrap_servers else config.zookeeper.connect
    require_topic(
        args.topic,
        bootstrap_servers=settings.bootstrap_servers,
        zookeeper_connect=zookeeper,
        allow_auto_create=False,
        client_id=settings.client_id,
        timeout_ms=settings.connect_timeout_ms,
        section="consumer",
        create_command=suggest(
            args, "topics", "create", args.topic, "--partitions", str(config.broker.num_partitions)
        ),
    )
    registry = SchemaRegistryClient.from_config(config.registry, url=args.registry_url)
    printer = RecordPrinter(
        key_format=Format(args.key_format),
        value_format=Format(args.value_format),
        avro=AvroText(registry),
        print_key=args.print_key,
        print_offset=args.print_offset,
        print_headers=args.print_headers,
        print_timestamp=args.print_timestamp,
        separator=separator(args.separator),
    )
    try:
        with Consumer(settings, zookeeper_connect=zookeeper) as consumer:
            partitions = consumer.partitions_for(args.topic, metadata_wait_ms)
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
                line=printer.line,
                max_messages=args.max_messages,
                timeout_ms=args.timeout_ms,
            )
    finally:
        registry.close()
    log.info("consumed %d records from %s", count, args.topic)
    return 0
