"""``lumber config show|defaults``: the effective configuration, and every key with its documentation.

``show`` masks every secret that is set (``sasl_password = "********"``); a secret given by file or
variable shows only the file's path or the variable's name (``sasl_password_file``, ``sasl_password_env``).
"""

from __future__ import annotations

import argparse
from typing import Any

from lumber.config import LumberConfig, dump_config, render_defaults


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "config", help="show the effective configuration or the documented defaults"
    )
    sub = parser.add_subparsers(metavar="ACTION", required=True)
    show = sub.add_parser(
        "show", help="print the effective config (file plus environment overrides; secrets masked)"
    )
    show.set_defaults(handler=_show)
    defaults = sub.add_parser("defaults", help="print every key with its default and documentation")
    defaults.set_defaults(handler=_defaults)


def _show(_args: argparse.Namespace, config: LumberConfig) -> int:
    print(f"# source: {config.source}")
    print(dump_config(config, mask_secrets=True), end="")
    return 0


def _defaults(_args: argparse.Namespace, _config: LumberConfig) -> int:
    print(render_defaults(), end="")
    return 0
