"""The ``[completeness]`` section of ``lumber.toml``: when the load declares an hour of a topic done.

After each run the load decides, for every (topic, event-time hour) of the last ``lookback_ms``, whether
the hour is complete (:mod:`pipeline.completeness`) and publishes a ``_SUCCESS`` marker and an event for
the hours that are (:mod:`pipeline.completeness_publisher`). This section says how it decides:

* ``require = "audit"``: the audit's reconciliation of the hour is COMPLETE: every message the producing
  tiers (producers, mirrors) counted in the hour is loaded or quarantined, within ``tolerance``, and the
  hour ended ``grace_ms`` ago;
* ``require = "watermark"`` (topics whose producers are not audited): every partition of the topic has been
  loaded past ``hour end + grace_ms`` of record time, or is loaded to its log end (an idle partition);
* ``topic_overrides``: per topic, ``"TOPIC: require=watermark grace_ms=600000 tolerance=0.1%"`` (any of the
  three keys; the rest from the section);
* ``alert_after_ms``: an hour still not complete this long after its end is *overdue*: the load's metrics
  (``lumber_completeness_overdue_hours``) and the console's loads page say so.

Differences from Hadoop's and kafka-connect-hdfs's ``_SUCCESS``: the marker is a JSON document (the counts,
the manifest that completed the hour, the time), not an empty file; existence-checking readers see no
difference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Self

from pydantic import model_validator

from audit.audit_tolerance import Tolerance
from broker.config_section import ConfigSection, setting

Require = Literal["audit", "watermark"]
REQUIRES: tuple[Require, ...] = ("audit", "watermark")
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_OVERRIDE = re.compile(r"\s*([A-Za-z0-9._-]{1,249})\s*:\s*(.*)")
_OVERRIDE_KEYS = ("require", "grace_ms", "tolerance")


@dataclass(frozen=True)
class CompletenessPolicy:
    """How one topic's hours are decided (the section's keys, with the topic's override applied)."""

    require: Require
    grace_ms: int
    tolerance: Tolerance


class CompletenessConfig(ConfigSection):
    """Completeness markers: when an hour of a topic is done, and how downstream jobs learn it."""

    publish: bool = setting(
        True,
        "After each load run, decide the completeness of the hours of the last lookback_ms and publish a "
        "_SUCCESS marker (in the hour's folder) and an event (on topic) for each hour that became complete "
        "or stopped being complete. Never fails a run: an error waits for the next one.",
    )
    require: Require = setting(
        "audit",
        "What makes an hour complete: 'audit' (the audit's reconciliation: loaded + quarantined = produced, "
        "within tolerance) or 'watermark' (every partition loaded past the hour's end + grace_ms, for "
        "topics whose producers are not audited).",
    )
    grace_ms: int = setting(
        600_000,
        "An hour is decided only this long after its end (late records may still come until then).",
        ge=0,
    )
    tolerance: str = setting(
        "0",
        "How many messages an hour may miss or duplicate and still be complete: a count ('5') or a share of "
        "the produced count ('0.1%').",
    )
    topic_overrides: list[str] = setting(
        [],
        "Per-topic policy: 'TOPIC: require=watermark grace_ms=600000 tolerance=0.1%' (any of the three keys; "
        "the others from this section).",
    )
    topic: str = setting(
        "_completeness",
        "Topic of the completeness events (JSON, key 'topic/YYYY-MM-DDTHH'), created by the load if missing.",
    )
    topic_partitions: int = setting(1, "Partitions of the events topic when the load creates it.", ge=1)
    lookback_ms: int = setting(
        7 * 24 * 3_600_000,
        "The hours a run decides: those that ended in the last lookback_ms (older ones keep their markers).",
        ge=3_600_000,
    )
    alert_after_ms: int = setting(
        7_200_000,
        "An hour not complete this long after its end is overdue: a metric and a mark on the console's loads "
        "page (0: never).",
        ge=0,
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not _TOPIC_NAME.fullmatch(self.topic):
            raise ValueError(f"completeness.topic must be a topic name, got {self.topic!r}")
        Tolerance.parse(self.tolerance, "completeness.tolerance")
        self.overrides()
        return self

    def overrides(self) -> dict[str, dict[str, str]]:
        """``topic_overrides`` as ``{topic: {key: value}}`` (raises :class:`ValueError` naming the entry)."""
        found: dict[str, dict[str, str]] = {}
        for entry in self.topic_overrides:
            matched = _OVERRIDE.fullmatch(entry)
            if matched is None:
                raise ValueError(
                    f"completeness.topic_overrides: expected 'TOPIC: key=value ...', got {entry!r}"
                )
            topic, rest = matched.group(1), matched.group(2)
            if topic in found:
                raise ValueError(f"completeness.topic_overrides: topic {topic!r} is listed twice")
            keys: dict[str, str] = {}
            for item in rest.replace(",", " ").split():
                key, sep, value = item.partition("=")
                if not sep or key not in _OVERRIDE_KEYS:
                    raise ValueError(
                        f"completeness.topic_overrides: {entry!r}: expected key=value with a key of "
                        f"{', '.join(_OVERRIDE_KEYS)}, got {item!r}"
                    )
                keys[key] = value
            if "require" in keys and keys["require"] not in REQUIRES:
                raise ValueError(
                    f"completeness.topic_overrides: {entry!r}: require must be one of {', '.join(REQUIRES)}"
                )
            if "grace_ms" in keys and not keys["grace_ms"].isdigit():
                raise ValueError(
                    f"completeness.topic_overrides: {entry!r}: grace_ms must be a whole number of ms"
                )
            if "tolerance" in keys:
                Tolerance.parse(keys["tolerance"], f"completeness.topic_overrides {topic}")
            found[topic] = keys
        return found

    def policy(self, topic: str) -> CompletenessPolicy:
        """The policy of ``topic``: the section's keys, with its override applied."""
        keys = self.overrides().get(topic, {})
        require = keys.get("require", self.require)
        return CompletenessPolicy(
            require="watermark" if require == "watermark" else "audit",
            grace_ms=int(keys.get("grace_ms", self.grace_ms)),
            tolerance=Tolerance.parse(keys.get("tolerance", self.tolerance)),
        )
