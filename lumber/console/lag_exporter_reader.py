"""A zookeeper group's lag history, from the lag exporter's window (``[console] lag_exporter_url``).

ZooKeeper keeps only each partition's last commit (``/consumers/<group>/offsets/<topic>/<partition>``), so
it has no history to read. ``lumber groups lag --watch --metrics-port N`` observes groups every
``--interval`` and keeps Burrow's window of the last ``--window`` observations per partition
(:class:`~broker.client.groups.lag_evaluation.LagWindow`); it serves them as JSON at ``/lag-history``
(:mod:`pipeline.lag_exporter`). :func:`read_exporter_history` asks it for one group, and each sample of a
commit becomes a point at its observation time (committed offset, log end offset); a sample the exporter
took before the group's first commit (``no_commit``: measured from a reset position, not committed) is no
point of the history. Without a configured exporter, or
when it does not answer or does not watch the group, the history is empty and its note says why and where
history would come from: the rest of the page does not depend on it.

:func:`read_exporter_statuses` asks it once for every group it watches and judges each group's window by
Burrow's rules (:func:`~broker.client.groups.lag_evaluation.evaluate`, the worst partition's status), as the
exporter's ``lumber_consumergroup_status`` does: the groups list's status column.

A secured exporter (``[lag_exporter] users_file``, ``ssl_certfile``) is asked with ``[console]
lag_exporter_username`` and the first line of ``lag_exporter_password_file`` (read at each request, so a new
password applies at once), its certificate checked against ``lag_exporter_cafile``
(:func:`exporter_get`).

Not thread-safe: one request, one thread.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx

from broker.client.groups.lag_evaluation import LagSample, LagStatus, evaluate
from broker.record.topic_partition import TopicPartition
from lumber.console.lag_history import LagHistory, LagPoint
from lumber.console.sources import Sources
from pipeline.lag_exporter import HISTORY_PATH

NOT_CONFIGURED = (
    "ZooKeeper keeps only each partition's last commit: for a lag history, run a lag exporter "
    "(lumber groups lag --all-groups --watch --metrics-port N) and set [console] lag_exporter_url "
    "to http://HOST:N"
)


def exporter_get(sources: Sources, url: str, params: dict[str, str]) -> httpx.Response:
    """GET ``url`` of the lag exporter with the console's credentials and CA for it, if configured."""
    console = sources.config.console
    auth: tuple[str, str] | None = None
    if console.lag_exporter_username:
        password = ""
        if console.lag_exporter_password_file:
            with Path(console.lag_exporter_password_file).open(encoding="utf-8") as fh:
                password = fh.readline().rstrip("\r\n")
        auth = (console.lag_exporter_username, password)
    verify: ssl.SSLContext | bool = True
    if console.lag_exporter_cafile:
        verify = ssl.create_default_context(cafile=console.lag_exporter_cafile)
    return httpx.get(url, params=params or None, auth=auth, verify=verify, timeout=sources.timeout_ms / 1000)


def read_exporter_history(sources: Sources, group: str, kind: str) -> LagHistory:
    """``group``'s samples in the exporter's window (see the module docstring)."""
    base = sources.config.console.lag_exporter_url.rstrip("/")
    if not base:
        return LagHistory("none", note=NOT_CONFIGURED)
    source = f"{base}{HISTORY_PATH}"
    try:
        response = exporter_get(sources, source, {"group": group, "kind": kind})
    except (httpx.HTTPError, OSError) as exc:
        return LagHistory(source, note=f"the lag exporter at {base} did not answer: {exc!r}")
    if response.status_code == 404:
        return LagHistory(
            source,
            note=f"the lag exporter at {base} does not watch {kind} group {group!r} "
            "(lumber groups lag --group G --watch, or --all-groups)",
        )
    try:
        response.raise_for_status()
        found = response.json()["groups"]
        return LagHistory(source, _points(found[0]["partitions"] if found else []))
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        return LagHistory(source, note=f"the lag exporter at {base} gave no lag history: {exc!r}")


def read_exporter_statuses(sources: Sources, now_ms: int) -> tuple[dict[tuple[str, str], str], str]:
    """Burrow's status of each ``(group, kind)`` the exporter watches, and a note when there are none
    (no exporter configured, or it did not answer)."""
    base = sources.config.console.lag_exporter_url.rstrip("/")
    if not base:
        return {}, "no lag exporter ([console] lag_exporter_url): no status"
    try:
        response = exporter_get(sources, f"{base}{HISTORY_PATH}", {})
        response.raise_for_status()
        groups = response.json()["groups"]
        statuses = {}
        for found in groups:
            worst = LagStatus.OK
            for partition in found["partitions"]:
                samples = [
                    LagSample(
                        int(s["observed_at_ms"]),
                        int(s["committed_offset"]),
                        int(s["committed_at_ms"]),
                        int(s["log_end_offset"]),
                        no_commit=bool(s.get("no_commit", False)),
                    )
                    for s in partition["samples"]
                ]
                worst = max(worst, evaluate(samples, now_ms))
            statuses[(str(found["group"]), str(found["kind"]))] = worst.name
    except (httpx.HTTPError, OSError, ValueError, KeyError, TypeError) as exc:
        return {}, f"the lag exporter at {base} gave no statuses: {exc!r}"
    return statuses, ""


def _points(partitions: list[dict[str, Any]]) -> dict[TopicPartition, tuple[LagPoint, ...]]:
    return {
        TopicPartition(str(p["topic"]), int(p["partition"])): tuple(
            LagPoint(int(s["observed_at_ms"]), int(s["committed_offset"]), int(s["log_end_offset"]))
            for s in p["samples"]
            if not s.get("no_commit", False)
        )
        for p in partitions
    }
