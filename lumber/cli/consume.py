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

``--group NAME`` consumes as a member of consumer group NAME, as ``kafka-console-consumer --group`` does:
the group's partitions of the topic (shared with its other members), from its committed offsets (where it
has none: the log end, or the log start with ``--from-beginning``), committing as it goes (every ``[group]
auto_commit_interval_ms``, and what was printed when it ends); ``--no-commit`` reads the same way and
commits nothing (a peek). ``--kind zookeeper|kafka`` chooses the group's kind (default ``[group]
protocol``). ``--partition`` and ``--offset`` choose positions themselves and do not go with ``--group``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import UnknownPartitionError
from broker.client.groups.group_consumer import GroupConsumer
from broker.record.topic_partition import TopicPartition
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.console_tools import MessageSource, consume_to
from lumber.cli.invocation import suggest
from lumber.cli.produce import separator
from lumber.cli.record_format import AvroText, Format, RecordPrinter
from lumber.cli.topic_check import require_topic
from pipeline.durations import DURATION_HELP, DurationAction
from schemas.client import SchemaRegistryClient

if TYPE_CHECKING:
    from lumber.config import LumberConfig

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
    parser.add_argument(
        "--group",
        metavar="NAME",
        help="consume as a member of this consumer group, from its committed offsets, committing as it goes",
    )
    parser.add_argument(
        "--kind",
        choices=("zookeeper", "kafka"),
        help="with --group: the group's kind (default: [group] protocol)",
    )
    parser.add_argument(
        "--no-commit", action="store_true", help="with --group: read without committing anything (a peek)"
    )
    add_cluster_options(parser)
    parser.add_argument("--registry-url", metavar="URL", help="schema registry (default: [registry] url)")
    parser.set_defaults(handler=_consume)


def _consume(args: argparse.Namespace, config: LumberConfig) -> int:
    if args.group is None and (args.no_commit or args.kind):
        print("lumber: error: --no-commit and --kind go with --group", file=sys.stderr)
        return 2
    if args.group is not None and (args.partition is not None or args.offset is not None):
        message = "--group reads the group's partitions from its offsets: no --partition or --offset"
        print(f"lumber: error: {message}", file=sys.stderr)
        return 2
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
        security=settings.client_security("consumer"),
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
        if args.group is not None:
            count = _consume_in_group(args, config, settings, printer)
            log.info("consumed %d records from %s in group %s", count, args.topic, args.group)
            return 0
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


def _consume_in_group(
    args: argparse.Namespace, config: LumberConfig, settings: ConsumerConfig, printer: RecordPrinter
) -> int:
    """``--group``: print the records the group gives this member (see the module docstring)."""
    group = config.group.replace(
        protocol=args.kind or config.group.protocol, auto_commit_enable=not args.no_commit
    )
    with GroupConsumer(
        args.group, zookeeper_connect=config.zookeeper.connect, config=group, consumer_config=settings
    ) as member:
        if args.no_commit:  # explicit positions never acknowledged: nothing is ever committed
            source: MessageSource = member.create_message_streams({args.topic: 1}, explicit_positions=True)[
                args.topic
            ][0]
        else:  # records are handed out one at a time: what was printed is what gets committed
            member.subscribe([args.topic])
            source = member
        return consume_to(
            source,
            sys.stdout.buffer,
            line=printer.line,
            max_messages=args.max_messages,
            timeout_ms=args.timeout_ms,
        )
