"""Task progress of the running Spark jobs, reported while a load reads (Spark's UI is off by default).

:class:`SparkProgress` polls ``SparkContext.statusTracker()`` from a daemon thread and reports a line such as
``spark: stage 3: 5/8 tasks done (2 running)`` whenever the numbers change. ``lumber etl run`` shows these
lines as the job prints them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any


class SparkProgress:
    """Reports task progress every ``interval_s`` while entered (see the module docstring)."""

    def __init__(self, spark: Any, report: Callable[[str], None], interval_s: float = 1.0) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._report = report
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lumber-spark-progress", daemon=True)
        self._last: dict[int, tuple[int, int, int]] = {}

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - progress is best effort, never a reason to fail a load
                return

    def poll(self) -> None:
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is None:
                continue
            state = (int(info.numCompletedTasks), int(info.numActiveTasks), int(info.numTasks))
            if self._last.get(stage_id) != state:
                self._last[stage_id] = state
                done, running, total = state
                self._report(f"spark: stage {stage_id}: {done}/{total} tasks done ({running} running)")

    def __enter__(self) -> SparkProgress:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
