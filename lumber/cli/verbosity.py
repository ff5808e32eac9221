"""How loud ``lumber`` is: the logging setup of every command, done once by :func:`lumber.cli.main`.

A command that answers and exits (``consume``, ``produce``, ``topics``, ``groups``, ``schemas get``,
``audit verify``, ...) logs WARNING and above: its output is its answer, and a run that worked leaves stderr
empty. A server, a command that runs until it is stopped (``broker start``, ``schemas serve``, ``mirror``;
their parsers call :func:`serves`), logs INFO: that is its record. Either way the level can be chosen:

* ``-v`` / ``--verbose``: INFO; ``-vv``: DEBUG;
* ``--log-level LEVEL``: DEBUG, INFO, WARNING, ERROR or CRITICAL (wins over ``-v``);
* ``--debug``: DEBUG, and the traceback of an error.

The options are accepted before and after the command (``lumber -v consume t`` and ``lumber consume t
-v``). Below DEBUG the libraries that narrate routine steps at INFO (kazoo's connection steps, httpx's
requests) are kept at WARNING in commands: ``-v`` shows Lumber's own progress, not theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Libraries that log every routine step at INFO.
CHATTY_LIBRARIES = ("kazoo", "httpx", "httpcore")


def serves(parser: argparse.ArgumentParser) -> None:
    """Mark ``parser``'s command as a server: it logs INFO by default."""
    parser.set_defaults(server=True)


def add_options(parser: argparse.ArgumentParser) -> None:
    """``-v``, ``--log-level`` and ``--debug`` on the top-level parser and on every command below it."""
    _add(parser, top=True)
    for command in _commands(parser):
        _add(command, top=False)


def _add(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # Below the top level the defaults are SUPPRESS, so that an option not given after the command leaves
    # the one given before it in place (argparse copies a command's namespace over the top-level one). A
    # command that has an option of the same name for its own use keeps it.
    taken = set(parser._option_string_actions)
    if not {"-v", "--verbose"} & taken:
        parser.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=0 if top else argparse.SUPPRESS,
            help="log INFO (progress, connections); twice: DEBUG (default: warnings and errors only)",
        )
    if "--log-level" not in taken:
        parser.add_argument(
            "--log-level",
            type=str.upper,
            choices=LEVELS,
            default=None if top else argparse.SUPPRESS,
            metavar="LEVEL",
            help="log at this level: " + ", ".join(LEVELS) + " (default: WARNING; INFO for servers)",
        )
    if "--debug" not in taken:
        parser.add_argument(
            "--debug",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="log at DEBUG level and show tracebacks",
        )


def _commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser`` (commands and their actions), depth first."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:  # argparse has no public walk of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                found.append(child)
                found.extend(_commands(child))
    return found


def level_of(args: argparse.Namespace) -> int:
    """The level ``args`` ask for (see the module docstring)."""
    if args.debug:
        return logging.DEBUG
    if args.log_level is not None:
        level: int = logging.getLevelName(args.log_level)
        return level
    if args.verbose >= 2:
        return logging.DEBUG
    if args.verbose == 1 or getattr(args, "server", False):
        return logging.INFO
    return logging.WARNING


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record comes (a test may have replaced it meanwhile)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # handle() holds the handler's lock around emit()
        super().emit(record)


@contextlib.contextmanager
def configured(args: argparse.Namespace) -> Iterator[None]:
    """Logging to stderr for the command of ``args`` while it runs; the previous setup afterwards (so that
    ``main()`` called twice in one process, as the tests do, leaves nothing behind)."""
    level = level_of(args)
    root = logging.getLogger()
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    quiet = level > logging.DEBUG and not getattr(args, "server", False)
    libraries = [logging.getLogger(name) for name in CHATTY_LIBRARIES]
    saved = (root.level, [library.level for library in libraries])
    root.addHandler(handler)
    root.setLevel(level)
    for library in libraries:
        library.setLevel(max(level, logging.WARNING) if quiet else logging.NOTSET)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        for library, library_level in zip(libraries, saved[1], strict=True):
            library.setLevel(library_level)
