"""The marker store on every filesystem backend (``[file]``, ``[hdfs-native]``, ``[webhdfs]``: the embedded
HDFS of the tests, a real NameNode and DataNode): writes, replacements, and files that are not Lumber's.

What is on disk is looked at from outside :mod:`pipeline.fs` (:class:`tests.support.fs_backends.Outside`:
pathlib, or hdfs-native's fsspec filesystem), and foreign files are put there the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
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
from pipeline.fs import FileSystem, join
from tests.support.fs_backends import BACKENDS, Outside, backend_filesystem

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


@pytest.fixture(params=BACKENDS)
def fs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FileSystem]:
    with backend_filesystem(request, tmp_path, "markers") as found:
        yield found


def store(fs: FileSystem, job: str = "hourly") -> MarkerStore:
    return MarkerStore(fs, fs.root, job)


def hour_folder(fs: FileSystem) -> Outside:
    return Outside(join(fs.root, "views", "dt=2026-11-22", "hr=08"))


def test_hours_are_named_as_the_folders_are() -> None:
    assert hour_text(HOUR) == "2026-11-22T08"
    assert parse_hour("2026-11-22T08") == parse_hour("2026-11-22 08") == HOUR
    assert hour_rel("views", HOUR) == "views/dt=2026-11-22/hr=08"
    with pytest.raises(ValueError, match="'2026-11-22T8:30': expected an hour as YYYY-MM-DDTHH"):
        parse_hour("2026-11-22T8:30")


def test_complete_then_incomplete_then_complete_again(fs: FileSystem) -> None:
    markers = store(fs)
    folder = hour_folder(fs)
    assert markers.read("views", HOUR) == HourMarkers()
    markers.mark_complete(marker(), HourMarkers())
    assert folder.names() == ["_SUCCESS"]  # no temporary file left beside it
    assert CompletenessMarker.loads(folder.read("_SUCCESS"), "x") == marker()
    found = markers.read("views", HOUR)
    assert found.success == marker()
    assert found.revision == 1
    markers.mark_incomplete(marker("INCOMPLETE", 2, 10), found)
    assert folder.names() == ["_INCOMPLETE"]
    found = markers.read("views", HOUR)
    assert (found.success, found.incomplete, found.revision) == (None, marker("INCOMPLETE", 2, 10), 2)
    markers.mark_complete(marker("COMPLETE", 3, 10), found)
    assert folder.names() == ["_SUCCESS"]
    assert CompletenessMarker.loads(folder.read("_SUCCESS"), "x") == marker("COMPLETE", 3, 10)
    assert markers.read("views", HOUR) == HourMarkers(success=marker("COMPLETE", 3, 10))


def test_a_stale_temporary_file_of_a_crashed_write_is_replaced(fs: FileSystem) -> None:
    """A run killed after writing ``._SUCCESS.lumber-tmp`` and before renaming it: the next write replaces
    the temporary file (it is Lumber's, hidden from readers) and renames its own into place."""
    folder = hour_folder(fs)
    folder.write("._SUCCESS.lumber-tmp", b'{"torn')
    store(fs).mark_complete(marker(), HourMarkers())
    assert folder.names() == ["_SUCCESS"]
    assert CompletenessMarker.loads(folder.read("_SUCCESS"), "x") == marker()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "an empty _SUCCESS (Spark's or Hadoop's output committer writes one), not a Lumber marker"),
        (b"{torn", "not a valid completeness marker: not JSON"),
        (b'{"format": 1, "kind": "other"}', "not a valid completeness marker"),
    ],
)
def test_a_marker_that_is_not_lumbers_is_refused_and_never_touched(
    fs: FileSystem, content: bytes, message: str
) -> None:
    folder = hour_folder(fs)
    folder.write("_SUCCESS", content)
    url = join(fs.root, "views/dt=2026-11-22/hr=08/_SUCCESS")
    with pytest.raises(ForeignMarkerError) as caught:
        store(fs).read("views", HOUR)
    assert str(caught.value).startswith(f"{url}: "), caught.value  # hdfs://127.0.0.1:<port>/... on HDFS
    assert message in str(caught.value)
    assert "left as it is" in str(caught.value)
    assert folder.read("_SUCCESS") == content
    assert folder.names() == ["_SUCCESS"]


def test_another_jobs_marker_is_not_this_jobs(fs: FileSystem) -> None:
    store(fs, "other").mark_complete(marker(job="other"), HourMarkers())
    written = hour_folder(fs).read("_SUCCESS")
    with pytest.raises(ForeignMarkerError, match=r"a marker of job 'other'.*expected job 'hourly'") as caught:
        store(fs).read("views", HOUR)
    assert join(fs.root, "views/dt=2026-11-22/hr=08/_SUCCESS") in str(caught.value)
    assert hour_folder(fs).read("_SUCCESS") == written
