"""The hourly scheduler's settings: the ``[schedule]`` section of ``lumber.toml``.

``lumber etl schedule`` (:mod:`pipeline.scheduler`) runs the load of ``[load] job`` once per ``every_ms``
(whole hours), ``delay_ms`` after each hour ends, catching up on missed hours in order after downtime and
retrying a failed run with exponential backoff. Its command-line flags override these keys.
"""

from __future__ import annotations

import datetime as dt
from typing import Self

from pydantic import field_validator, model_validator

from broker.config_section import ConfigSection, setting

HOUR_MS = 3_600_000


def parse_hour_ms(text: str, what: str = "hour") -> int:
    """``YYYY-MM-DDTHH`` (UTC) as ms since the epoch; :class:`ValueError` naming ``what`` otherwise."""
    for layout in ("%Y-%m-%dT%H", "%Y-%m-%d %H", "%Y-%m-%dT%H:00", "%Y-%m-%dT%H:00:00"):
        try:
            moment = dt.datetime.strptime(text.strip().removesuffix("Z"), layout).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
        return int(moment.timestamp()) * 1000
    raise ValueError(f"{what} {text!r}: expected an hour as YYYY-MM-DDTHH (UTC), e.g. 2026-11-22T10")


class ScheduleConfig(ConfigSection):
    """`lumber etl schedule`: when the hourly load runs, how it catches up and how it retries."""

    every_ms: int = setting(
        HOUR_MS,
        "Run the load once per this many ms: a whole number of hours (the load cuts at hour boundaries, "
        "`etl run --until-hour`). Hours are counted from the Unix epoch, UTC.",
        ge=HOUR_MS,
    )
    delay_ms: int = setting(
        600_000,
        "Grace period: the run that loads everything before hour H starts this long after H, so that late "
        "producers and the brokers' flush have delivered the hour.",
        ge=0,
    )
    retry_backoff_ms: int = setting(
        60_000,
        "Pause before retrying a failed run (or one that found the job's lock held); doubles on every "
        "further failure of the same hour, up to retry_backoff_max_ms.",
        ge=1000,
    )
    retry_backoff_max_ms: int = setting(1_800_000, "Longest pause between two retries.", ge=1000)
    max_attempts: int = setting(
        0,
        "Give up (exit 1) after this many failed attempts at one hour; the next start retries it. 0: retry "
        "for ever.",
        ge=0,
    )
    start_hour: str = setting(
        "",
        "First hour to load when the scheduler has no state yet, YYYY-MM-DDTHH (UTC); it then loads each "
        "hour after it in order. Empty: start with the latest hour whose grace period has passed (that run "
        "also loads anything older that is not loaded yet).",
    )
    state_file: str = setting(
        "",
        "JSON file where the scheduler records the last hour it loaded (and its recent runs), so that a "
        "restart catches up from there. Empty: <[dev] state_dir>/etl/schedule-<job>.json.",
    )
    kill_timeout_ms: int = setting(
        30_000,
        "After a second SIGTERM/SIGINT (abort), how long the running load gets to exit after SIGTERM before "
        "it is SIGKILLed. A killed run commits nothing; the next run repairs what it left.",
        ge=0,
    )

    @field_validator("every_ms", mode="before")
    @classmethod
    def _whole_hours(cls, every_ms: object) -> object:
        # before the bound, so that 30 minutes is told what is wrong with it, not only that it is too short
        if (
            isinstance(every_ms, int)
            and not isinstance(every_ms, bool)
            and (every_ms % HOUR_MS or not every_ms)
        ):
            raise ValueError(f"schedule.every_ms must be a whole number of hours, got {every_ms} ms")
        return every_ms

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ValueError(
                f"schedule.retry_backoff_max_ms ({self.retry_backoff_max_ms}) must be at least "
                f"retry_backoff_ms ({self.retry_backoff_ms})"
            )
        if self.start_hour:
            parse_hour_ms(self.start_hour, "schedule.start_hour")
        return self
