"""The ``lumber`` command line: one subcommand group per module in this package.

Each group module exposes ``register(subparsers)``, which adds its parser and sets ``handler`` to a function
``(args, config) -> exit code``. Errors from any Lumber package end the command with their message on stderr
and exit code 1 (2 for a bad config or usage); a traceback is shown only with ``--debug``. Commands log
warnings and errors only, servers INFO; ``-v`` and ``--log-level`` change that (:mod:`.verbosity`).
Every command that reaches a cluster takes ``--zookeeper`` and ``--bootstrap-server``, applied to the config
before its handler runs (:mod:`.cluster_options`); duration flags take ``10m`` (:mod:`pipeline.durations`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from audit.errors import AuditError
from broker.errors import BrokerError
from lumber import __version__
from lumber.cli import (
    audit,
    broker,
    config_cmd,
    console,
    consume,
    demo,
    dev,
    etl,
    groups,
    log,
    mirror,
    produce,
    schemas,
    topics,
    users,
    verbosity,
)
from lumber.cli.cluster_options import with_cluster_options
from lumber.config import load_config
from pipeline.errors import ConfigError, PipelineError
from schemas.errors import SchemaError

GROUPS = (
    dev,
    config_cmd,
    broker,
    topics,
    users,
    log,
    schemas,
    produce,
    consume,
    groups,
    mirror,
    etl,
    audit,
    demo,
    console,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lumber",
        description="Lumber: Kafka-style brokers, ZooKeeper consumer groups, an Avro schema registry "
        "and hourly Spark loads into Parquet, with an audit trail.",
    )
    parser.add_argument("--version", action="version", version=f"lumber {__version__}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="lumber.toml to read (default: $LUMBER_CONFIG, else ./lumber.toml if present, else defaults)",
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.register(subparsers)
    verbosity.add_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with verbosity.configured(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        config = with_cluster_options(args, load_config(args.config))
        code: int = args.handler(args, config)
    except ConfigError as exc:
        if args.debug:
            raise
        print(f"lumber: config error: {exc}", file=sys.stderr)
        return 2
    except (PipelineError, AuditError, BrokerError, SchemaError) as exc:
        if args.debug:
            raise
        print(f"lumber: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lumber: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
