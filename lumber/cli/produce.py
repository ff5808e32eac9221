"""``lumber produce TOPIC``: send the lines of stdin to a topic, one record per line.

With ``--key-separator SEP`` (e.g. ``TAB``) a line ``key<SEP>value`` gives the record that key; a line
without the separator has a null key. ``--value-format`` says what a value is:

* ``raw`` (default): the line's bytes as they are;
* ``json``: the same bytes, checked to be JSON first;
* ``avro``: a record in Avro's JSON encoding (what ``lumber consume`` and ``kafka-avro-console-consumer``
  print: a non-null union value wrapped as ``{"string": "x"}``), sent as Confluent-framed Avro. The schema is
  ``--schema-file F.avsc``, registered under ``--subject`` (default ``<topic>-value``) in the registry
  (``--registry-url``, else ``[registry] url``) as ``kafka-avro-console-producer`` does; the registry
  answers its id (the same id again when it is known) or refuses a schema the subject's compatibility
  forbids.

A line that is not what ``--value-format`` says is not sent: its number and the reason go to stderr, and the
exit code is 1. A topic that does not exist is an error at once, naming the command that creates it
(``[broker] auto_create_topics`` is off by default, as in production Kafka). Settings come from
``[producer]`` (the cluster from ``bootstrap_servers``, else ZooKeeper's ``[zookeeper] connect``); the options
override them. Exit code 0 when every line was acknowledged, 1 when any failed (each failure on stderr).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastavro import json_reader

from audit.audited_producer import audited_producer
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.console_tools import produce_lines
from lumber.cli.invocation import suggest
from lumber.cli.topic_check import require_topic
from schemas.avro_schema import AvroSchema
from schemas.client import SchemaRegistryClient
from schemas.errors import EncodeError, SchemaError
from schemas.serde import AvroSerde

if TYPE_CHECKING:
    from lumber.config import LumberConfig

log = logging.getLogger(__name__)

#: Names accepted for separators that are awkward to type in a shell.
SEPARATOR_NAMES = {"TAB": "\t", "SPACE": " ", "COMMA": ",", "PIPE": "|"}
VALUE_FORMATS = ("raw", "json", "avro")


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
        "--value-format",
        choices=VALUE_FORMATS,
        default="raw",
        help="raw (default): the line as is; json: checked to be JSON; avro: a record in Avro's JSON "
        "encoding, sent as Confluent-framed Avro (needs --schema-file)",
    )
    parser.add_argument(
        "--schema-file",
        type=Path,
        metavar="F.avsc",
        help="the Avro schema of --value-format avro (registered under --subject)",
    )
    parser.add_argument("--subject", help="registry subject of --schema-file (default: <topic>-value)")
    parser.add_argument("--registry-url", metavar="URL", help="schema registry (default: [registry] url)")
    add_cluster_options(parser)
    parser.set_defaults(handler=_produce)


def separator(name: str) -> str:
    """A ``--key-separator`` value: a name from :data:`SEPARATOR_NAMES` or the literal string."""
    return SEPARATOR_NAMES.get(name.upper(), name)


def _produce(args: argparse.Namespace, config: LumberConfig) -> int:
    if args.value_format == "avro" and args.schema_file is None:
        print("lumber produce: --value-format avro needs --schema-file F.avsc", file=sys.stderr)
        return 2
    if args.value_format != "avro" and (args.schema_file is not None or args.subject is not None):
        print("lumber produce: --schema-file and --subject go with --value-format avro", file=sys.stderr)
        return 2
    settings = config.producer
    if args.acks is not None:
        # idempotence needs acks=all: asking for less on the command line turns it off (as Kafka's
        # producer does when acks is set and enable.idempotence is not)
        settings = settings.replace(
            acks=args.acks, enable_idempotence=settings.enable_idempotence and args.acks == "all"
        )
    if args.compression is not None:
        settings = settings.replace(compression_type=args.compression)
    if args.bootstrap_server:
        settings = settings.replace(bootstrap_servers=list(args.bootstrap_server))
    key_separator = separator(args.key_separator).encode("utf-8") if args.key_separator else None
    zookeeper = None if settings.bootstrap_servers else config.zookeeper.connect
    require_topic(
        args.topic,
        bootstrap_servers=settings.bootstrap_servers,
        zookeeper_connect=zookeeper,
        allow_auto_create=settings.allow_auto_topic_creation,
        client_id=settings.client_id,
        timeout_ms=settings.connect_timeout_ms,
        section="producer",
        security=settings.client_security("producer"),
        create_command=suggest(
            args, "topics", "create", args.topic, "--partitions", str(config.broker.num_partitions)
        ),
    )
    registry: SchemaRegistryClient | None = None
    encode: Callable[[bytes], bytes] | None = _check_json if args.value_format == "json" else None
    if args.value_format == "avro":
        registry = SchemaRegistryClient.from_config(config.registry, url=args.registry_url)
        encode = _avro_encoder(registry, args.schema_file, args.subject or f"{args.topic}-value")

    def report(error: BaseException) -> None:
        print(
            f"lumber: {'not sent' if isinstance(error, ValueError) else 'delivery failed'}: {error}",
            file=sys.stderr,
        )

    try:
        with audited_producer(settings, zookeeper_connect=zookeeper, registry=config.registry) as producer:
            summary = produce_lines(
                producer,
                args.topic,
                sys.stdin.buffer,
                key_separator=key_separator,
                partition=args.partition,
                encode_value=encode,
                on_error=report,
            )
    finally:
        if registry is not None:
            registry.close()
    log.info("sent %d records to %s, %d failed", summary.sent, args.topic, summary.failed)
    if summary.failed:
        print(f"lumber: {summary.failed} line(s) failed, {summary.sent} records sent", file=sys.stderr)
    return 1 if summary.failed else 0


def _check_json(value: bytes) -> bytes:
    try:
        json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    return value


def _avro_encoder(registry: SchemaRegistryClient, path: Path, subject: str) -> Callable[[bytes], bytes]:
    """Register the schema of ``path`` under ``subject``; return: Avro-JSON line -> framed Avro payload."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path}: cannot read the schema file: {exc}") from exc
    schema = AvroSchema.parse(text)
    schema_id = registry.register(subject, text)
    log.info("%s is schema id %d of subject %r", path, schema_id, subject)
    serde = AvroSerde(registry)
    parsed = schema.fastavro_schema
    fields = {f["name"] for f in parsed.get("fields", ())} if isinstance(parsed, dict) else set()
    is_record = isinstance(parsed, dict) and parsed.get("type") == "record"

    def encode(value: bytes) -> bytes:
        try:
            document = json.loads(value)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not JSON: {exc}") from exc
        if is_record:
            if not isinstance(document, dict):
                raise ValueError(
                    f"expected a JSON object (a record of {path}), got {type(document).__name__}"
                )
            unknown = sorted(set(document) - fields)
            if unknown:
                raise ValueError(f"fields {unknown} are not in the schema of {path}")
        try:
            record = next(iter(json_reader(io.StringIO(json.dumps(document)), parsed)))
        except AttributeError as exc:  # fastavro's answer to a union value not wrapped in its type
            raise ValueError(
                f"does not fit {path}: write a non-null union value wrapped in its type, e.g. "
                f'{{"string": "x"}} (Avro\'s JSON encoding, as `lumber consume` prints it): {exc}'
            ) from exc
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"does not fit {path}: {type(exc).__name__}: {exc}") from exc
        try:
            return serde.encode(schema_id, record)
        except EncodeError as exc:
            raise ValueError(str(exc)) from exc

    return encode
