"""Durations as the command line takes them: ``250ms``, ``90s``, ``30m``, ``1h``, ``2h30m``, ``1d`` (parts
added up), or ``0``. Every duration flag of ``lumber`` takes this form (:class:`DurationAction`, or
:func:`parse_duration_ms` in the handler) and says so in its help; the older integer ``-ms`` flags
(``--timeout-ms``) still take milliseconds. In ``lumber.toml`` durations stay integers in ``_ms`` keys."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from pipeline.errors import PipelineError

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d))+")
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d)")


class DurationError(PipelineError):
    """A duration that does not parse; the message names the option and the text."""


def parse_duration_ms(text: str, what: str = "duration") -> int:
    """``text`` in milliseconds; :class:`DurationError` naming ``what`` (e.g. ``--every``) otherwise."""
    value = text.strip().lower()
    if value == "0":
        return 0
    if not _DURATION.fullmatch(value):
        raise DurationError(f"{what} {text!r}: expected a duration such as 90s, 30m, 1h, 2h30m or 1d")
    return sum(int(n) * _UNITS_MS[unit] for n, unit in _DURATION_PART.findall(value))


#: what every duration flag's help says it takes
DURATION_HELP = "a duration: 250ms, 90s, 10m, 1h, 2h30m, 1d"


class DurationAction(argparse.Action):
    """A duration flag stored in ms: ``--timeout 10m``. Declared with a second, ``-ms`` spelling
    (``--timeout-ms``), it keeps taking a plain integer of milliseconds there, as before (a duration too).
    A bad value ends the command with a usage error naming the flag."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        flag = option_string or self.option_strings[0]
        try:
            if flag.endswith("-ms") and text.strip().lstrip("-").isdigit():
                value = int(text)
            else:
                value = parse_duration_ms(text, flag)
        except DurationError as exc:
            parser.error(str(exc))
        setattr(namespace, self.dest, value)
