"""The marker store on a real (local) filesystem: writes, replacements, and files that are not Lumber's."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.completeness_marker import (
    CompletenessMarker,
    ForeignMarkerError,
    HourMarkers,
    MarkerStore,
    hour_rel,
    hour_text,
    parse_hour,
)
from pipeline.fs import open_filesystem

HOUR = 1_795_334_400_000  # 2026-11-22T08


def marker(
    state: str = "COMPLETE", revision: int = 1, loaded: int = 8, job: str = "hourly"
) -> CompletenessMarker:
    return CompletenessMarker(
        kind="lumber-completeness",
        job=job,
        topic="views",
        hour=hour_text(HOUR),
        hour_start_ms=HOUR,
        state=state,  # type: ignore[arg-type]
        revision=revision,
        require="audit",
        expected=8,
        loaded=loaded,
        quarantined=0,
        missing=0,
        duplicate=max(0, loaded - 8),
        manifest_sequence=revision,
        manifest_run_id=f"run-{revision}",
        decided_at_ms=HOUR + 7_200_000,
        hosts_missing={},
    )


def store(tmp_path: Path, job: str = "hourly") -> MarkerStore:
    fs = open_filesystem(str(tmp_path))
    return MarkerStore(fs, fs.root, job)


def test_hours_are_named_as_the_folders_are() -> None:
    assert hour_text(HOUR) == "2026-11-22T08"
    assert parse_hour("2026-11-22T08") == parse_hour("2026-11-22 08") == HOUR
    assert hour_rel("views", HOUR) == "views/dt=2026-11-22/hr=08"
    with pytest.raises(ValueError, match="'2026-11-22T8:30': expected an hour as YYYY-MM-DDTHH"):
        parse_hour("2026-11-22T8:30")


def test_complete_then_incomplete_then_complete_again(tmp_path: Path) -> None:
    markers = store(tmp_path)
    folder = tmp_path / "views" / "dt=2026-11-22" / "hr=08"
    assert markers.read("views", HOUR) == HourMarkers()
    markers.mark_complete(marker(), HourMarkers())
    assert sorted(p.name for p in folder.iterdir()) == ["_SUCCESS"]
    found = markers.read("views", HOUR)
    assert found.success == marker()
    assert found.revision == 1
    markers.mark_incomplete(marker("INCOMPLETE", 2, 10), found)
    assert sorted(p.name for p in folder.iterdir()) == ["_INCOMPLETE"]
    found = markers.read("views", HOUR)
    assert (found.success, found.incomplete, found.revision) == (None, marker("INCOMPLETE", 2, 10), 2)
    markers.mark_complete(marker("COMPLETE", 3, 10), found)
    assert sorted(p.name for p in folder.iterdir()) == ["_SUCCESS"]
    assert CompletenessMarker.loads((folder / "_SUCCESS").read_text(), "x") == marker("COMPLETE", 3, 10)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "an empty _SUCCESS (Spark's or Hadoop's output committer writes one), not a Lumber marker"),
        (b"{torn", "not a valid completeness marker: not JSON"),
        (b'{"format": 1, "kind": "other"}', "not a valid completeness marker"),
    ],
)
def test_a_marker_that_is_not_lumbers_is_refused_and_never_touched(
    tmp_path: Path, content: bytes, message: str
) -> None:
    folder = tmp_path / "views" / "dt=2026-11-22" / "hr=08"
    folder.mkdir(parents=True)
    (folder / "_SUCCESS").write_bytes(content)
    with pytest.raises(ForeignMarkerError, match="_SUCCESS") as caught:
        store(tmp_path).read("views", HOUR)
    assert message in str(caught.value)
    assert "left as it is" in str(caught.value)
    assert (folder / "_SUCCESS").read_bytes() == content


def test_another_jobs_marker_is_not_this_jobs(tmp_path: Path) -> None:
    store(tmp_path, "other").mark_complete(marker(job="other"), HourMarkers())
    with pytest.raises(ForeignMarkerError, match=r"a marker of job 'other'.*expected job 'hourly'"):
        store(tmp_path).read("views", HOUR)
