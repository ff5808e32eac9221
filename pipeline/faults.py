"""Failure injection for the load job's tests: explicit, documented hooks instead of monkeypatching.

Set ``[load] fault_injection`` (or ``LUMBER_LOAD__FAULT_INJECTION='["commit:manifest"]'`` in the
environment, which reaches ``spark-submit`` runs too) to a list of specs:

``commit:<step>``
    Raise :class:`~pipeline.load_errors.InjectedFault` right after the named step of a run, on the driver.
    The steps, in order (:data:`COMMIT_STEPS`; see :mod:`pipeline.commit` for what each does):
    ``plan`` (the plan is persisted), ``staged`` (every task's output is in staging and counted),
    ``manifest_tmp`` (the manifest's temporary file is written), ``manifest`` (the manifest is renamed into
    place: the run is committed), ``move:<i>`` (the i-th staged file, 1-based, is moved to its final name),
    ``staging_cleanup`` (the run's staging folder is deleted), ``pointer`` (CURRENT names the manifest).
    ``completeness`` (:data:`AFTER_COMMIT_STEPS`: after the run is recorded and its audit counts are
    published, before any hour is decided or marked: :mod:`pipeline.completeness_publisher`) is a step
    too; ``commit:<step>:kill`` SIGKILLs the driver there instead of raising (``kill -9`` between the
    commit and the markers).
    A step also fires when recovery repeats it (rolling a manifest forward), so a rerun with the same spec
    fails the same way: tests rerun without it.
``task:<id>`` or ``task:<id>:kill``
    In the Spark task that reads task ``<id>`` of the plan, on its first attempt only (attempt number 0),
    after it handed Spark its first Arrow batch: SIGKILL its own Python worker, as a crash would. Spark
    retries the task (on a master that allows retries, e.g. ``local[2,4]``, or any cluster).
``task:<id>:raise``
    The same, raising :class:`~pipeline.load_errors.InjectedFault` instead of killing the worker.
``task:<id>:stall``
    The same place, stalling the task for :data:`STALL_S` seconds instead, its first output files open: a
    test kills what the task writes to (a DataNode) while the write is known to be unfinished.

Unknown specs are rejected when the job starts, so a typo cannot silently inject nothing.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.load_errors import InjectedFault, LoadError

COMMIT_STEPS = ("plan", "staged", "manifest_tmp", "manifest", "move:<i>", "staging_cleanup", "pointer")
#: steps after the run is recorded as committed (its outcome stands when one fails)
AFTER_COMMIT_STEPS = ("completeness",)
_COMMIT = re.compile(
    r"commit:(plan|staged|manifest_tmp|manifest|move:[1-9][0-9]*|staging_cleanup|pointer|completeness)(:kill)?"
)
_TASK = re.compile(r"task:([0-9]+)(?::(kill|raise|stall))?")
#: how long ``task:<id>:stall`` holds the task
STALL_S = 5.0


@dataclass(frozen=True)
class Faults:
    """The parsed ``fault_injection`` specs. Picklable (it travels to the tasks)."""

    commit_steps: frozenset[str] = frozenset()
    #: task id -> "kill" or "raise"
    tasks: tuple[tuple[int, str], ...] = ()
    #: steps after which the driver SIGKILLs itself instead of raising
    kill_steps: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, specs: Iterable[str]) -> Faults:
        steps: set[str] = set()
        kills: set[str] = set()
        tasks: dict[int, str] = {}
        for spec in specs:
            commit = _COMMIT.fullmatch(spec)
            task = _TASK.fullmatch(spec)
            if commit:
                (kills if commit.group(2) else steps).add(commit.group(1))
            elif task:
                tasks[int(task.group(1))] = task.group(2) or "kill"
            else:
                raise LoadError(
                    f"[load] fault_injection: unknown spec {spec!r}; expected 'commit:<step>' with a step of "
                    f"{', '.join(COMMIT_STEPS + AFTER_COMMIT_STEPS)} (':kill' after one SIGKILLs the driver "
                    "there), or 'task:<id>[:kill|:raise|:stall]'"
                )
        return cls(frozenset(steps), tuple(sorted(tasks.items())), frozenset(kills))

    def after(self, step: str) -> None:
        """Raise :class:`InjectedFault` if a failure is injected right after ``step``."""
        if step in self.kill_steps:
            os.kill(os.getpid(), signal.SIGKILL)
        if step in self.commit_steps:
            raise InjectedFault(f"fault injected after commit step {step!r} ([load] fault_injection)")

    def in_task(self, task_id: int, attempt_number: int) -> None:
        """Fail the first attempt of ``task_id`` if asked to (called after its first Arrow batch)."""
        if attempt_number != 0:
            return
        for wanted, how in self.tasks:
            if wanted == task_id:
                if how == "raise":
                    raise InjectedFault(f"fault injected into attempt 0 of task {task_id}")
                if how == "stall":
                    time.sleep(STALL_S)
                    return
                os.kill(os.getpid(), signal.SIGKILL)
