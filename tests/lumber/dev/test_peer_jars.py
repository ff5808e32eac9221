"""The peers' jar cache: found under LUMBER_JARS_DIR, and a clear error naming `make jars` if empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumber.dev.peer_jars import JARS_DIR_ENV, jars_dir, peer_classpath, peer_jars
from pipeline.errors import DevStackError


def test_the_cache_is_the_checkouts_jars_folder_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JARS_DIR_ENV, raising=False)
    assert jars_dir() == Path(__file__).resolve().parents[3] / ".jars"


def test_a_peers_jars_are_listed_sorted_and_joined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path))
    (tmp_path / "kafka").mkdir()
    for name in ("kafka_2.13-4.1.1.jar", "b.jar", "a.jar", "notes.txt"):
        (tmp_path / "kafka" / name).write_bytes(b"")
    jars = peer_jars("kafka")
    assert [jar.name for jar in jars] == ["a.jar", "b.jar", "kafka_2.13-4.1.1.jar"]
    assert peer_classpath("kafka") == ":".join(str(jar) for jar in jars)


def test_no_jars_is_an_error_naming_the_folder_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path))
    with pytest.raises(DevStackError) as caught:
        peer_jars("hadoop")
    message = str(caught.value)
    assert f"no hadoop jars in {tmp_path / 'hadoop'}" in message
    assert "make jars" in message
    assert "peers/hadoop/pom.xml" in message
