"""The manifest's JSON: files written by earlier versions load unchanged; malformed ones name file and field.

``tests/pipeline/formats/manifest-format1.json`` was written by the hand-written ``Manifest.to_json`` of
commit 96c3bd0, before the JSON went through :mod:`pipeline.json_value`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from broker.record.topic_partition import TopicPartition
from pipeline.commit import CommitProtocol
from pipeline.fs import open_filesystem
from pipeline.load_errors import CommitError, MalformedJsonError
from pipeline.manifest import Manifest, ManifestPointer, RangeResult, StagedFile, WindowCount
from pipeline.ranges import LossRange, OffsetRange

FORMATS = Path(__file__).parent / "formats"
OLD = FORMATS / "manifest-format1.json"
R0 = OffsetRange("page_view", 0, 1000, 1200)
R1 = OffsetRange("page_view", 1, 950, 980)
STAGING = "_lumber/hourly/staging/20261122T100500Z-3f2a9c"


def old_json() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(OLD.read_text())
    return value


def test_a_manifest_written_before_the_json_rewrite_loads_field_by_field() -> None:
    manifest = Manifest.loads(OLD.read_text(), str(OLD))
    assert (manifest.job, manifest.sequence, manifest.run_id) == ("hourly", 7, "20261122T100500Z-3f2a9c")
    assert (manifest.committed_at_ms, manifest.window_ms, manifest.cutoff_ms) == (
        1795341900000,
        600000,
        1795341600000,
    )
    assert manifest.offsets == {
        TopicPartition("click", 0): 5,
        TopicPartition("page_view", 0): 1200,
        TopicPartition("page_view", 1): 980,
    }
    assert manifest.ranges == (RangeResult(0, R0, 199, 1), RangeResult(1, R1, 30, 0))
    assert manifest.counts == (
        WindowCount("page_view", 0, 1795341000000, 120, 1),
        WindowCount("page_view", 0, 1795341600000, 79, 0),
        WindowCount("page_view", 1, 1795341000000, 30, 0),
    )
    assert manifest.losses == (LossRange("page_view", 1, 900, 950, "out_of_range"),)
    assert manifest.files[0] == StagedFile(
        "data",
        0,
        R0,
        "2026-11-22",
        "09",
        f"{STAGING}/page_view/task=0/attempt=0.17/data/dt=2026-11-22/hr=09/part-00000.parquet",
        "page_view/dt=2026-11-22/hr=09/page_view+0+1000+1200+0.parquet",
        48211,
        199,
        2834991234,
    )
    # a file from before tasks reported bytes, rows and CRC-32: the keys are absent
    assert "bytes" not in old_json()["files"][1]
    assert (manifest.files[1].bytes, manifest.files[1].rows, manifest.files[1].crc32) == (None, None, None)
    assert manifest.staging == STAGING
    assert (manifest.rows, manifest.quarantined) == (229, 1)


def test_the_json_written_now_keeps_every_key_and_value_of_the_old_one() -> None:
    manifest = Manifest.loads(OLD.read_text(), str(OLD))
    written = json.loads(manifest.dumps())
    old = old_json()
    assert next(iter(written)) == "format"
    for file in old["files"]:  # absent optional values are now written as null
        file.update({k: file.get(k) for k in ("bytes", "rows", "crc32")})
    assert written == old
    assert Manifest.loads(manifest.dumps(), "again") == manifest


def test_an_old_manifest_on_disk_gives_the_committed_offsets(tmp_path: Path) -> None:
    fs = open_filesystem(str(tmp_path / "w"))
    protocol = CommitProtocol(fs, "hourly")
    meta = tmp_path / "w" / "_lumber" / "hourly"
    (meta / "manifests").mkdir(parents=True)
    shutil.copy(OLD, meta / "manifests" / f"{7:020d}.json")
    (meta / "CURRENT").write_text('{"sequence": 7}\n')  # as the old code wrote it
    assert protocol.latest_sequence() == 7
    assert protocol.committed_offsets() == {
        TopicPartition("click", 0): 5,
        TopicPartition("page_view", 0): 1200,
        TopicPartition("page_view", 1): 980,
    }
    assert protocol.recover().did_anything is False


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda v: v["files"][0].update(bytes="many"),
            r"files\.0\.bytes: Input should be a valid integer.*'many'",
        ),
        (lambda v: v["ranges"][1].pop("rows"), r"ranges\.1\.rows: Field required"),
        (lambda v: v["counts"][0].pop("topic"), r"counts\.0\.topic: Field required"),
        (
            lambda v: v["offsets"]["page_view"].update(x=3),
            r"offsets\.page_view\.x\.\[key\]: Input should be a valid int",
        ),
        (
            lambda v: v["ranges"][0].update(until_offset=5),
            r"ranges\.0\.range: .*not a range: page_view-0 \[1000, 5\)",
        ),
        (lambda v: v.update(format=2), r"format 2, expected 1"),
        (lambda v: v.pop("format"), r"format None, expected 1"),
        (lambda v: v.update(job=None), r"job: Input should be a valid string"),
    ],
)
def test_a_malformed_manifest_names_the_file_and_the_field(change: Any, message: str) -> None:
    value = old_json()
    change(value)
    with pytest.raises(MalformedJsonError, match=r"^/w/m\.json: not a valid manifest: .*" + message):
        Manifest.loads(json.dumps(value), "/w/m.json")


def test_a_manifest_that_is_not_json_is_a_commit_error_naming_the_file() -> None:
    with pytest.raises(CommitError, match=r"^/w/m\.json: not a valid manifest: not JSON: "):
        Manifest.loads('{"format": 1, "job": ', "/w/m.json")


def test_the_pointer_reads_what_the_old_code_wrote() -> None:
    assert ManifestPointer.loads('{"sequence": 7}\n', "CURRENT") == ManifestPointer(7)
    assert ManifestPointer(8).dumps(indent=None) == '{"sequence":8}'
