"""The commands ``lumber`` suggests (in refusals, errors, "stop it with" lines), written to work as printed.

A suggestion starts with ``lumber`` as the user typed it (``.venv/bin/lumber`` under ``make``, when that is
not the ``lumber`` on ``PATH``) and repeats the options that chose what the command acted on: ``--config``
when one was given, and whatever the caller adds (``--state-dir``). A ``lumber`` that runs another
``lumber`` (the demo runs ``python -m lumber``) passes its own form down in :data:`INVOKED_AS_ENV`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path

#: Set by a ``lumber`` for the ``lumber`` processes it starts: how the user ran the first one.
INVOKED_AS_ENV = "LUMBER_INVOKED_AS"


def invoked_as() -> str:
    """How the user ran ``lumber``: ``lumber`` when that is on ``PATH``, else the path as typed."""
    inherited = os.environ.get(INVOKED_AS_ENV)
    if inherited:
        return inherited
    argv0 = sys.argv[0] if sys.argv else ""
    if not argv0.endswith("lumber"):
        return "lumber"
    found = shutil.which("lumber")
    if found and os.path.realpath(found) == os.path.realpath(argv0):
        return "lumber"
    try:
        return str(Path(argv0).absolute().relative_to(Path.cwd()))
    except ValueError:
        return argv0


def suggest(args: argparse.Namespace | None, *words: str | Path) -> str:
    """``lumber [--config C] WORDS...`` as a shell line that works as printed (quoted where needed)."""
    parts = [invoked_as()]
    config = getattr(args, "config", None) if args is not None else None
    if config:
        parts += ["--config", str(config)]
    parts += [str(word) for word in words]
    return shlex.join(parts)
