"""The ``lumber`` command line: one command per module in this package, imported only when it runs.

:data:`COMMANDS` names every command, the module that declares it and its one-line help. ``lumber
--version`` and ``lumber --help`` import none of those modules (the help lists the commands from the table);
``lumber topics list`` imports :mod:`lumber.cli.topics` alone, calls its ``register(subparsers)`` and runs
the ``handler`` that register set: a function ``(args, config) -> exit code`` (exit codes below).
:func:`build_parser` without arguments declares every command (for tests and completions); with the command
line, only its command, the others being one-line entries of the help.

Rules for a command module (a new one is one :class:`Command` line in :data:`COMMANDS`; the lead applies these
when merging, ``tests/lumber/cli/test_startup.py`` checks them for every command):

1. ``register(subparsers)`` only declares: it adds the parser with the same help as its :class:`Command`
   line, sets ``handler`` and returns. It reads no config, opens nothing.
2. The module imports, at its top, only what declaring needs: the standard library, :mod:`lumber.cli`'s own
   light helpers (:mod:`.cluster_options`, :mod:`.invocation`, :mod:`.throttle_option`, :mod:`.verbosity`),
   :mod:`pipeline.durations`, and the packages' ``errors`` modules. Everything else (the clients, ZooKeeper,
   the config, Spark, the broker server, the console's web framework) is imported inside the handler that
   uses it, or in a sibling module that only the handler imports; types for annotations under
   ``TYPE_CHECKING``. The test fails a command whose ``lumber COMMAND --help`` loads any of
   :data:`HEAVY_MODULES`.
3. Exit codes (the README's table, :data:`EXIT_OK` ...): 0 done; 1 the operation failed (the cluster said no,
   a check found damage, a timeout); 2 bad usage or config (argparse's own code: an unknown command,
   flag or name, a missing topic); 3 busy (another run holds the lock). An error of a Lumber package ends
   the command with its one-line message on stderr and exit 1 (2 for :class:`~pipeline.errors.ConfigError`
   and for an error whose class says ``exit_code = 2``, such as a topic that does not exist);
   a traceback is shown only with ``--debug``. A mistyped command or flag is answered with the closest
   known one ("did you mean").
4. Output to a closed pipe (``lumber consume t | head``) ends the command quietly with exit 0, as ``cat``
   does (:func:`main`).

Commands log warnings and errors only, servers INFO; ``-v`` and ``--log-level`` change that
(:mod:`.verbosity`). Every command that reaches a cluster takes ``--zookeeper`` and ``--bootstrap-server``,
applied to the config before its handler runs (:mod:`.cluster_options`); duration flags take ``10m``
(:mod:`pipeline.durations`).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from lumber import __version__
from lumber.cli import verbosity

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BUSY = 3

#: Packages no parser may import: each costs from a tenth of a second to seconds (or is a server).
HEAVY_MODULES = (
    "pyspark",
    "numba",
    "pyarrow",
    "fastapi",
    "starlette",
    "uvicorn",
    "prometheus_client",
    "broker.server",
    "broker.log",
)


@dataclass(frozen=True)
class Command:
    """One ``lumber`` command: its name, the module that declares it (``register``) and its help line."""

    name: str
    module: str
    help: str


COMMANDS = (
    Command("dev", "lumber.cli.dev", "start, inspect and stop the local stack (ZooKeeper, ...)"),
    Command("config", "lumber.cli.config_cmd", "show the effective configuration or the documented defaults"),
    Command("broker", "lumber.cli.broker", "run a broker"),
    Command(
        "topics",
        "lumber.cli.topics",
        "create, list, describe and delete topics, elect preferred leaders (in ZooKeeper)",
    ),
    Command(
        "cluster",
        "lumber.cli.cluster",
        "move partitions between brokers: reassign, rebalance, decommission a broker",
    ),
    Command("users", "lumber.cli.users", "SASL users (SCRAM credentials in ZooKeeper)"),
    Command("acls", "lumber.cli.acls", "ACLs of the brokers' authorizer (in ZooKeeper)"),
    Command("log", "lumber.cli.log", "inspect a broker's partition files"),
    Command("schemas", "lumber.cli.schemas", "run the Avro schema registry and register / inspect schemas"),
    Command("produce", "lumber.cli.produce", "send the lines of stdin to a topic, one record per line"),
    Command("consume", "lumber.cli.consume", "print a topic's records, one line per record"),
    Command(
        "groups",
        "lumber.cli.groups",
        "list, describe, rewind and delete consumer groups (zookeeper and kafka)",
    ),
    Command("mirror", "lumber.cli.mirror", "copy topics of one cluster into another (at least once)"),
    Command("etl", "lumber.cli.etl", "run the hourly Spark load job and show its status"),
    Command("audit", "lumber.cli.audit", "reconcile producer counts with load counts (the audit)"),
    Command(
        "demo", "lumber.cli.demo", "start a local stack and run the hourly pipeline end to end (make demo)"
    ),
    Command(
        "console", "lumber.cli.console", "the web console: cluster, topics, groups, schemas, loads, audit"
    ),
    Command(
        "http-users",
        "lumber.cli.http_users",
        "users of the console, lag exporter and metrics (HTTP Basic, a users file)",
    ),
)
_BY_NAME = {command.name: command for command in COMMANDS}
#: Top-level options that take a value (so the word after them is not the command).
_VALUED_OPTIONS = ("--config", "--log-level")
_SUGGESTIONS = "_lumber_suggestions"


class LumberArgumentParser(argparse.ArgumentParser):
    """argparse's parser, answering a mistyped command, action or flag with the closest known one."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        found, extras = super().parse_known_args(args, namespace)
        # The innermost parser returns first: it knows the flags of the command that was given.
        suggestions: dict[str, str] = dict(getattr(found, _SUGGESTIONS, {}))
        known = [option for option in self._option_string_actions if option.startswith("--")]
        for extra in extras:
            flag = extra.split("=", 1)[0]
            if flag.startswith("-") and flag not in suggestions:
                close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
                if close:
                    suggestions[flag] = close[0]
        setattr(found, _SUGGESTIONS, suggestions)
        return found, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        found, extras = self.parse_known_args(args, namespace)
        suggestions: dict[str, str] = getattr(found, _SUGGESTIONS, {})
        delattr(found, _SUGGESTIONS)
        if extras:
            message = "unrecognized arguments: " + " ".join(extras)
            hints = [(flag, close) for flag, close in suggestions.items() if flag in extras]
            if len(hints) == 1:
                message += f" (did you mean {hints[0][1]}?)"
            elif hints:
                pairs = ", ".join(f"{close} for {flag}" for flag, close in hints)
                message += f" (did you mean {pairs}?)"
            self.error(message)
        return found

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if action.choices is not None and value not in action.choices:
            choices = [str(choice) for choice in action.choices]
            close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
            message = f"invalid choice: {value!r}"
            if close:
                message += f" (did you mean {close[0]!r}?)"
            message += " (choose from " + ", ".join(choices) + ")"
            raise argparse.ArgumentError(action, message)
        super()._check_value(action, value)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``lumber`` parser: every command declared when ``argv`` is ``None``, else only the command that
    ``argv`` names (the others are help lines)."""
    parser = LumberArgumentParser(
        prog="lumber",
        description="Lumber: Kafka-style brokers, ZooKeeper consumer groups, an Avro schema registry "
        "and hourly Spark loads into Parquet, with an audit trail.",
        epilog="Exit codes: 0 done, 1 the operation failed, 2 bad usage or config, 3 busy. "
        "`lumber COMMAND --help` shows a command's actions and options.",
    )
    parser.add_argument("--version", action="version", version=f"lumber {__version__}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="lumber.toml to read (default: $LUMBER_CONFIG, else ./lumber.toml if present, else defaults)",
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    chosen = None if argv is None else command_name(argv)
    for command in COMMANDS:
        if argv is None or command.name == chosen:
            module = importlib.import_module(command.module)
            module.register(subparsers)
        else:
            subparsers.add_parser(command.name, help=command.help, add_help=False)
    verbosity.add_options(parser)
    return parser


def command_name(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is neither an option nor an option's value."""
    words = iter(argv)
    for word in words:
        if word in _VALUED_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in _BY_NAME else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    args = parser.parse_args(arguments)
    with verbosity.configured(args):
        try:
            code = _run(args)
            sys.stdout.flush()
        except BrokenPipeError:
            return _closed_pipe()
    return code


def _closed_pipe() -> int:
    """The reader of stdout went away (``lumber consume t | head``): end quietly, as ``cat`` does. Python
    would flush stdout again at exit and complain; point it at /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from audit.errors import AuditError
    from broker.cluster.zookeeper_auth import ZooKeeperAuth
    from broker.errors import BrokerError
    from lumber.cli.cluster_options import with_cluster_options
    from lumber.config import load_config
    from pipeline.errors import ConfigError, PipelineError
    from schemas.errors import SchemaError

    try:
        config = with_cluster_options(args, load_config(args.config))
        # the process's ZooKeeper identity, for every kazoo client the command makes (its password read
        # when the first one is made)
        ZooKeeperAuth.install(config.zookeeper.auth)
        code: int = args.handler(args, config)
    except ConfigError as exc:
        if args.debug:
            raise
        print(f"lumber: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (PipelineError, AuditError, BrokerError, SchemaError) as exc:
        if args.debug:
            raise
        print(f"lumber: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", EXIT_FAILED))  # an error caused by what was typed says 2
    except KeyboardInterrupt:
        print("lumber: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
