"""How ``lumber demo`` shows what it did: counts, durations, hours, sizes, the warehouse as a tree and query
results as tables (:mod:`lumber.demo` runs the steps; this module only formats).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from pipeline.fs import FileInfo, FileSystem


def count_text(value: int) -> str:
    """``12,345``."""
    return f"{value:,}"


def elapsed_text(seconds: float) -> str:
    """``3m 04.2s``, or ``4.2s`` under a minute."""
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)}m {secs:04.1f}s" if minutes else f"{secs:.1f}s"


def hour_text(ms: int) -> str:
    """The UTC hour of ``ms`` as ``YYYY-MM-DDTHH`` (the form ``--until-hour`` takes)."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H")


def isr_text(isr: Sequence[int]) -> str:
    """An ISR as ``2,0`` (leader first, as ZooKeeper holds it), ``-`` when empty."""
    return ",".join(map(str, isr)) or "-"


def clock_text(ms: int) -> str:
    """The UTC time of day of ``ms``, ``HH:MM``."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%H:%M")


def size_text(length: int) -> str:
    """A byte count in B, KiB or MiB."""
    size = float(length)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} MiB"


def warehouse_tree(fs: FileSystem, max_depth: int = 6) -> list[str]:
    """The warehouse of ``fs`` (its root) as an indented tree, read through :mod:`pipeline.fs` (``file:`` or
    ``hdfs://``): a folder holding only files becomes one line (count, size, an example name); hidden files
    (Hadoop's ``.crc``) are left out; topics first, then ``_errors`` and ``_lumber``."""

    def entries(folder: str) -> list[FileInfo]:
        return sorted(
            (p for p in fs.list_dir(folder) if not p.name.startswith(".")),
            key=lambda p: (p.name.startswith("_"), p.name),
        )

    def summary(files: list[FileInfo]) -> str:
        size = sum(f.length_bytes for f in files)
        example = files[0].name
        return f"{len(files)} file{'s' if len(files) != 1 else ''}, {size_text(size)}" + (
            f"   e.g. {example}" if len(files) > 1 else f"   {example}"
        )

    lines: list[str] = []

    def walk(folder: str, prefix: str, depth: int) -> None:
        children = entries(folder)
        for n, child in enumerate(children):
            last = n == len(children) - 1
            branch = "└── " if last else "├── "
            if child.is_dir:
                inside = entries(child.url)
                if not inside:
                    lines.append(f"{prefix}{branch}{child.name}/   (empty)")
                elif not any(p.is_dir for p in inside):
                    lines.append(f"{prefix}{branch}{child.name}/   {summary(inside)}")
                elif depth >= max_depth:
                    lines.append(f"{prefix}{branch}{child.name}/   ...")
                else:
                    lines.append(f"{prefix}{branch}{child.name}/")
                    walk(child.url, prefix + ("    " if last else "│   "), depth + 1)
            else:
                lines.append(f"{prefix}{branch}{child.name}")

    if fs.is_dir(fs.root):
        walk(fs.root, "", 1)
    return lines


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """``rows`` under ``columns``, numbers right-aligned, ``NULL`` for None."""

    def text(value: Any) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, float) and value.is_integer():
            return f"{int(value):,}"
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{value:,}" if abs(value) >= 10_000 else str(value)
        return str(value)

    cells = [[text(v) for v in row] for row in rows]
    numeric = [
        all(isinstance(row[i], int | float) or row[i] is None for row in rows) if rows else False
        for i in range(len(columns))
    ]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    return [line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)]
