"""Which cluster a command talks to, said the same way on every command that reaches one.

``--zookeeper CONNECT`` (host:port[,host:port...][/chroot]) overrides ``[zookeeper] connect``;
``--bootstrap-server HOST:PORT`` (repeatable, or comma-separated) overrides the ``bootstrap_servers`` of
``[producer]``, ``[consumer]`` and ``[load]``: the command learns the cluster from those brokers instead of
from the brokers registered in ZooKeeper. :func:`add_cluster_options` declares them on a command;
:func:`with_cluster_options` (called once by :mod:`lumber.cli` before any handler) applies them to the
config, so that a handler reads the cluster from its config sections alone. The old spelling
``--zookeeper-connect`` still works and logs a warning naming ``--zookeeper``.

``--topics`` means one thing on every command: topic names, comma-separated or repeated
(:func:`add_topics_option`); a regular expression over topic names is ``--topics-regex`` (the mirror).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lumber.config import LumberConfig

logger = logging.getLogger(__name__)

ZOOKEEPER = "--zookeeper"
BOOTSTRAP_SERVER = "--bootstrap-server"


class RenamedOption(argparse.Action):
    """Stores the value; given under an old option string (``renamed_from``), warns naming the new one."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, renamed_from: str = "", **kwargs: Any
    ) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.renamed_from = renamed_from

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if option_string == self.renamed_from:
            logger.warning("%s is deprecated, use %s", option_string, self.option_strings[0])
        setattr(namespace, self.dest, values)


class CommaList(argparse.Action):
    """Appends values to a list; a value may hold several, comma-separated (``--topics a,b --topics c``)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        found = list(getattr(namespace, self.dest, None) or [])
        found.extend(s.strip() for s in str(values).split(",") if s.strip())
        setattr(namespace, self.dest, found)


def add_cluster_options(parser: argparse.ArgumentParser, *, bootstrap: bool = True) -> None:
    """``--zookeeper`` (and ``--bootstrap-server`` unless the command only talks to ZooKeeper)."""
    parser.add_argument(
        ZOOKEEPER,
        "--zookeeper-connect",
        dest="zookeeper_connect",
        metavar="CONNECT",
        action=RenamedOption,
        renamed_from="--zookeeper-connect",
        help="ZooKeeper of the cluster, host:port[,host:port...][/chroot] (default: [zookeeper] connect)",
    )
    if bootstrap:
        parser.add_argument(
            BOOTSTRAP_SERVER,
            dest="bootstrap_server",
            metavar="HOST:PORT",
            action=CommaList,
            help="broker to learn the cluster from (repeatable or comma-separated; default: the section's "
            "bootstrap_servers, else the brokers registered in ZooKeeper)",
        )


class CommaText(argparse.Action):
    """Joins repeated values with commas into one text (``--topics a,b --topics c``: ``"a,b,c"``), for a
    command that reads the list as text (and quotes it as given in its errors)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        found = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, f"{found},{values}" if found is not None else str(values))


def add_topics_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--topics NAME[,NAME...]`` (repeatable) into ``args.topics``: the names as comma-separated text
    (``None`` when not given)."""
    parser.add_argument(
        "--topics", dest="topics", metavar="TOPIC[,TOPIC...]", action=CommaText, help=help_text
    )


def with_cluster_options(args: argparse.Namespace, config: LumberConfig) -> LumberConfig:
    """``config`` with ``--zookeeper`` and ``--bootstrap-server`` applied (unchanged without them)."""
    changes: dict[str, Any] = {}
    connect = getattr(args, "zookeeper_connect", None)
    if connect:
        changes["zookeeper"] = config.zookeeper.replace(connect=connect)
    servers = getattr(args, "bootstrap_server", None)
    if servers:
        changes["producer"] = config.producer.replace(bootstrap_servers=list(servers))
        changes["consumer"] = config.consumer.replace(bootstrap_servers=list(servers))
        changes["load"] = config.load.replace(bootstrap_servers=list(servers))
    return config.replace(**changes) if changes else config
