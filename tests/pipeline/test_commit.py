from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from broker.record.topic_partition import TopicPartition
from pipeline.commit import CommitProtocol
from pipeline.faults import Faults
from pipeline.fs import FileSystem, join, open_filesystem
from pipeline.load_errors import CommitError, InjectedFault
from pipeline.manifest import Manifest, RangeResult, StagedFile, WindowCount
from pipeline.ranges import LossRange, OffsetRange
from pipeline.run_record import RunRecord

JOB = "hourly"
T0 = OffsetRange("page_view", 0, 100, 150)
T1 = OffsetRange("page_view", 1, 40, 60)
TASKS = {0: T0, 1: T1}
STAGED = [  # (task, dataset, hour, run-relative path, bytes): what the tasks' chosen attempts wrote
    (0, "data", "09", "page_view/task=0/attempt=0.3/data/dt=2026-11-22/hr=09/part-00000.parquet", b"a" * 10),
    (0, "data", "10", "page_view/task=0/attempt=0.3/data/dt=2026-11-22/hr=10/part-00000.parquet", b"b" * 11),
    (1, "data", "09", "page_view/task=1/attempt=1.5/data/dt=2026-11-22/hr=09/part-00000.parquet", b"c" * 12),
    (
        1,
        "errors",
        "09",
        "page_view/task=1/attempt=1.5/errors/dt=2026-11-22/hr=09/part-00000.parquet",
        b"d" * 13,
    ),
]
#: a failed attempt's leftovers: never named, deleted with the staging folder
LEFTOVER = "page_view/task=1/attempt=0.4/data/dt=2026-11-22/hr=09/part-00000.parquet"
FINALS = {
    "page_view/dt=2026-11-22/hr=09/page_view+0+100+150+0.parquet": b"a" * 10,
    "page_view/dt=2026-11-22/hr=10/page_view+0+100+150+0.parquet": b"b" * 11,
    "page_view/dt=2026-11-22/hr=09/page_view+1+40+60+0.parquet": b"c" * 12,
    "_errors/page_view/dt=2026-11-22/hr=09/page_view+1+40+60+0.parquet": b"d" * 13,
}


@pytest.fixture
def fs(tmp_path: Path) -> FileSystem:
    return open_filesystem(str(tmp_path / "warehouse"))


def protocol(fs: FileSystem, *faults: str) -> CommitProtocol:
    return CommitProtocol(fs, JOB, faults=Faults.parse(faults), clock_ms=lambda: 1_795_341_900_000)


def stage(proto: CommitProtocol, run_id: str, base_sequence: int) -> list[Any]:
    proto.persist_plan(run_id, {"run_id": run_id, "base_sequence": base_sequence})
    proto.fs.create(join(proto.layout.staging(run_id), LEFTOVER), b"x" * 7, overwrite=False)
    written = []
    for task, dataset, hour, rel, data in STAGED:
        proto.fs.create(join(proto.layout.staging(run_id), rel), data, overwrite=False)
        staged = f"{proto.layout.staging_rel(run_id)}/{rel}"
        written.append(
            StagedFile(
                dataset, task, TASKS[task], "2026-11-22", hour, staged, bytes=len(data), rows=1, crc32=0
            )
        )
    return proto.name_files(run_id, list(reversed(written)))


def manifest(proto: CommitProtocol, run_id: str, files: list[Any], sequence: int = 1) -> Manifest:
    return Manifest(
        job=JOB,
        sequence=sequence,
        run_id=run_id,
        committed_at_ms=1_795_341_900_000,
        window_ms=600_000,
        offsets={TopicPartition("page_view", 0): 150, TopicPartition("page_view", 1): 60},
        ranges=(RangeResult(0, T0, 50, 0), RangeResult(1, T1, 19, 1)),
        counts=(
            WindowCount("page_view", 0, 1_795_338_000_000, 50, 0),
            WindowCount("page_view", 1, 1_795_338_000_000, 19, 1),
        ),
        losses=(LossRange("page_view", 1, 30, 40),),
        files=tuple(files),
        staging=proto.layout.staging_rel(run_id),
    )


def finals(root: Path) -> dict[str, bytes]:
    found = {}
    for path in root.rglob("*.parquet"):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith("_lumber/"):
            found[rel] = path.read_bytes()
    return found


def test_commit_publishes_files_offsets_and_counts(fs: FileSystem, tmp_path: Path) -> None:
    proto = protocol(fs)
    files = stage(proto, "run-1", 0)
    assert [(f.dataset, f.final) for f in files] == [
        ("data", "page_view/dt=2026-11-22/hr=09/page_view+0+100+150+0.parquet"),
        ("data", "page_view/dt=2026-11-22/hr=10/page_view+0+100+150+0.parquet"),
        ("data", "page_view/dt=2026-11-22/hr=09/page_view+1+40+60+0.parquet"),
        ("errors", "_errors/page_view/dt=2026-11-22/hr=09/page_view+1+40+60+0.parquet"),
    ]
    assert proto.committed_offsets() == {}
    wanted = manifest(proto, "run-1", files)
    proto.commit(wanted)
    warehouse = tmp_path / "warehouse"
    assert finals(warehouse) == FINALS
    assert not (warehouse / "_lumber" / JOB / "staging" / "run-1").exists()
    assert json.loads((warehouse / "_lumber" / JOB / "CURRENT").read_text()) == {"sequence": 1}
    assert proto.committed_offsets() == {
        TopicPartition("page_view", 0): 150,
        TopicPartition("page_view", 1): 60,
    }
    assert proto.latest_manifest() == wanted
    on_disk = json.loads((warehouse / "_lumber" / JOB / "manifests" / f"{1:020d}.json").read_text())
    assert on_disk["counts"][1] == {
        "topic": "page_view",
        "partition": 1,
        "window_start_ms": 1_795_338_000_000,
        "rows": 19,
        "quarantined": 1,
    }
    assert on_disk["losses"] == [
        {
            "topic": "page_view",
            "partition": 1,
            "from_offset": 30,
            "until_offset": 40,
            "reason": "out_of_range",
        }
    ]
    assert not proto.recover().did_anything


@pytest.mark.parametrize(
    ("step", "committed"),
    [
        ("manifest_tmp", False),
        ("manifest", True),
        ("move:1", True),
        ("move:4", True),
        ("staging_cleanup", True),
        ("pointer", True),
    ],
)
def test_a_failure_at_any_commit_step_is_repaired_by_recovery(
    fs: FileSystem, tmp_path: Path, step: str, committed: bool
) -> None:
    proto = protocol(fs, f"commit:{step}")
    files = stage(proto, "run-1", 0)
    with pytest.raises(InjectedFault, match=step):
        proto.commit(manifest(proto, "run-1", files))
    healthy = protocol(fs)
    report = healthy.recover()
    warehouse = tmp_path / "warehouse"
    if committed:
        # after "pointer" the run was complete: nothing is left to roll forward
        assert report.rolled_forward == (() if step == "pointer" else (1,))
        assert finals(warehouse) == FINALS
        assert healthy.committed_offsets()[TopicPartition("page_view", 0)] == 150
    else:
        assert report.discarded_staging == ("run-1",)
        assert report.discarded_tmp_manifests == 1
        assert finals(warehouse) == {}
        assert healthy.committed_offsets() == {}
    assert not (warehouse / "_lumber" / JOB / "staging" / "run-1").exists()
    assert not list((warehouse / "_lumber" / JOB / "manifests").glob("_tmp/*.json"))
    assert not healthy.recover().did_anything  # recovery is idempotent


def test_recovery_can_itself_be_interrupted_and_repeated(fs: FileSystem, tmp_path: Path) -> None:
    proto = protocol(fs, "commit:manifest")
    files = stage(proto, "run-1", 0)
    with pytest.raises(InjectedFault):
        proto.commit(manifest(proto, "run-1", files))
    with pytest.raises(InjectedFault):
        protocol(fs, "commit:move:2").recover()
    assert protocol(fs).recover().rolled_forward == (1,)
    assert finals(tmp_path / "warehouse") == FINALS


def test_staging_of_runs_that_never_committed_is_discarded(fs: FileSystem, tmp_path: Path) -> None:
    proto = protocol(fs)
    proto.commit(manifest(proto, "run-1", stage(proto, "run-1", 0)))
    stage(proto, "run-2", 1)  # died before its manifest
    report = proto.recover()
    assert report.discarded_staging == ("run-2",)
    assert report.rolled_forward == ()
    assert not (tmp_path / "warehouse" / "_lumber" / JOB / "staging").exists() or not any(
        (tmp_path / "warehouse" / "_lumber" / JOB / "staging").iterdir()
    )
    assert finals(tmp_path / "warehouse") == FINALS


def test_committed_offsets_need_no_listing_and_survive_a_lost_pointer(fs: FileSystem, tmp_path: Path) -> None:
    proto = protocol(fs)
    proto.commit(manifest(proto, "run-1", stage(proto, "run-1", 0)))
    meta = tmp_path / "warehouse" / "_lumber" / JOB
    # a later manifest committed by a run that died before moving CURRENT: found by probing forward
    second = Manifest(
        **{**manifest(proto, "run-2", []).__dict__, "sequence": 2, "offsets": {TopicPartition("x", 0): 9}}
    )
    (meta / "manifests" / f"{2:020d}.json").write_text(second.dumps())
    assert proto.latest_sequence() == 2
    assert proto.committed_offsets() == {TopicPartition("x", 0): 9}
    # CURRENT gone (a crash while replacing it): listing the manifests is the fallback
    (meta / "CURRENT").unlink()
    assert proto.latest_sequence() == 2
    (meta / "CURRENT").write_text("not json")
    assert proto.latest_sequence() == 2


def test_names_already_taken_get_the_next_number(fs: FileSystem, tmp_path: Path) -> None:
    proto = protocol(fs)
    proto.commit(manifest(proto, "run-1", stage(proto, "run-1", 0)))
    # the same ranges staged again (offsets moved back by hand): the names move on to +1
    files = stage(proto, "run-2", 1)
    assert [f.final.rsplit("+", 1)[-1] for f in files] == ["1.parquet"] * 4
    proto.commit(manifest(proto, "run-2", files, sequence=2))
    assert len(finals(tmp_path / "warehouse")) == 8


def test_a_committed_file_that_vanished_is_an_error(fs: FileSystem, tmp_path: Path) -> None:
    proto = protocol(fs, "commit:manifest")
    files = stage(proto, "run-1", 0)
    with pytest.raises(InjectedFault):
        proto.commit(manifest(proto, "run-1", files))
    staged = tmp_path / "warehouse" / files[2].staged
    staged.unlink()
    with pytest.raises(CommitError, match="neither file exists"):
        protocol(fs).recover()


def test_commit_refuses_a_stale_sequence_and_stray_files(fs: FileSystem) -> None:
    proto = protocol(fs)
    files = stage(proto, "run-1", 0)
    with pytest.raises(CommitError, match="expected 1"):
        proto.commit(manifest(proto, "run-1", files, sequence=2))
    outside = dataclasses.replace(files[0], staged="_lumber/hourly/staging/run-2/x.parquet")
    with pytest.raises(CommitError, match="outside the staging folder of run run-1"):
        proto.name_files("run-1", [outside])
    truncated = dataclasses.replace(files[0], bytes=11)
    with pytest.raises(CommitError, match="wrote 11 bytes, the file has 10"):
        proto.name_files("run-1", [truncated])
    fs.delete(join(fs.root, files[0].staged))
    with pytest.raises(CommitError, match="and not there"):
        proto.name_files("run-1", [files[0]])


def test_a_run_left_running_is_marked_crashed(fs: FileSystem) -> None:
    proto = protocol(fs)
    proto.start_run(RunRecord("run-1", JOB, "running", 1000, host="h", pid=7))
    stage(proto, "run-1", 0)
    proto.recover()
    last = proto.last_run()
    assert last is not None
    assert (last.run_id, last.outcome, last.sequence) == ("run-1", "crashed", None)
    assert "before its commit point" in (last.error or "")


def test_a_run_that_failed_after_its_commit_point_is_recorded_as_committed(fs: FileSystem) -> None:
    proto = protocol(fs, "commit:move:1")
    proto.start_run(RunRecord("run-1", JOB, "running", 1000))
    with pytest.raises(InjectedFault):
        proto.commit(manifest(proto, "run-1", stage(proto, "run-1", 0)))
    proto.write_run(RunRecord("run-1", JOB, "failed", 1000, error="InjectedFault: boom"))
    protocol(fs).recover()
    last = protocol(fs).last_run()
    assert last is not None
    assert (last.outcome, last.sequence) == ("committed", 1)
    assert last.error == (
        "InjectedFault: boom; it had passed its commit point (manifest 1): the next run rolled it forward"
    )


def test_a_manifest_naming_another_staging_folder_deletes_nothing(fs: FileSystem, tmp_path: Path) -> None:
    proto = protocol(fs)
    files = stage(proto, "run-1", 0)
    for staging in ("", "_lumber/hourly/staging", "_lumber/hourly/staging/run-2"):
        wrong = dataclasses.replace(manifest(proto, "run-1", files), staging=staging)
        with pytest.raises(CommitError, match="refusing to delete it"):
            proto.roll_forward(wrong)
        assert (tmp_path / "warehouse" / "_lumber" / JOB / "plans" / "run-1.json").exists()


def test_a_straggling_attempt_that_writes_after_the_commit_is_cleaned_up(
    fs: FileSystem, tmp_path: Path
) -> None:
    """A speculative copy Spark was still killing writes into its committed run's staging after the
    cleanup: the next recovery deletes it (the run's files are all published), whichever run is latest."""
    proto = protocol(fs)
    proto.commit(manifest(proto, "run-1", stage(proto, "run-1", 0)))
    proto.commit(manifest(proto, "run-2", stage(proto, "run-2", 1), sequence=2))
    late = join(
        proto.layout.staging("run-1"), "page_view/task=0/attempt=1.9/data/dt=2026-11-22/hr=09/p.parquet"
    )
    fs.create(late, b"late", overwrite=False)
    report = proto.recover()
    assert report.discarded_staging == ("run-1",)
    assert not fs.exists(proto.layout.staging("run-1"))
    assert len(finals(tmp_path / "warehouse")) == 8
    # the same, but a file of that committed run is not where its manifest says: a repair, not junk
    fs.create(late, b"late", overwrite=False)
    first = proto.read_manifest(1).files[0]
    (tmp_path / "warehouse" / first.final).unlink()
    with pytest.raises(CommitError, match="committed as manifest 1 \\(not the latest\\)"):
        proto.recover()
    assert fs.exists(late)
