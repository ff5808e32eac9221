from __future__ import annotations

import pytest

from pipeline.faults import STALL_S, Faults
from pipeline.load_errors import InjectedFault, LoadError


def test_commit_steps_fire_only_where_asked() -> None:
    faults = Faults.parse(["commit:manifest", "commit:move:2", "task:3:raise", "task:5"])
    faults.after("plan")
    faults.after("move:1")
    with pytest.raises(InjectedFault, match="'manifest'"):
        faults.after("manifest")
    with pytest.raises(InjectedFault, match="'move:2'"):
        faults.after("move:2")
    assert faults.tasks == ((3, "raise"), (5, "kill"))


def test_task_faults_hit_the_first_attempt_only() -> None:
    faults = Faults.parse(["task:3:raise"])
    faults.in_task(2, 0)
    faults.in_task(3, 1)
    with pytest.raises(InjectedFault, match="attempt 0 of task 3"):
        faults.in_task(3, 0)


@pytest.mark.parametrize("spec", ["commit:manifests", "commit:move:0", "task:x", "kill"])
def test_unknown_specs_are_refused(spec: str) -> None:
    with pytest.raises(LoadError, match="unknown spec"):
        Faults.parse([spec])


def test_a_stalled_task_goes_on_after_the_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("pipeline.faults.time.sleep", slept.append)
    faults = Faults.parse(["task:1:stall"])
    assert faults.tasks == ((1, "stall"),)
    faults.in_task(1, 1)  # a retry is not stalled
    faults.in_task(1, 0)
    assert slept == [STALL_S]
