"""No module of the code over 600 lines (STYLE.md: one concept per module): a module that grows past it is
split by concern, as ``replica_manager.py`` (its ISR changes: ``isr_changes.py``), ``segment.py`` (its
header reads: ``segment_framer.py``, its load check: ``segment_headers.py``), ``group_metadata_manager.py``
(its loading: ``group_loading.py``) and ``bench/rebalance.py`` (its commit run: ``rebalance_commits.py``)
were. The tests are held to the same bound (a test module is also pytest-xdist's unit of scheduling under
``--dist loadfile``: a long one keeps a worker busy while the others idle): ``test_socket_server.py``,
``test_log_cleaner.py``, ``test_replication.py`` and ``test_group_coordinator.py`` were split by concern into
files beside them, their shared helpers into helper modules."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "schemas", "audit", "mirror", "pipeline", "lumber", "jobs", "bench", "tests")
MAX_LINES = 600


def module_lines() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def test_no_module_is_over_600_lines() -> None:
    over = {name: lines for name, lines in module_lines().items() if lines > MAX_LINES}
    assert over == {}, f"split these modules by concern (at most {MAX_LINES} lines each): {over}"


def test_the_count_is_read() -> None:
    """The check above sees the real modules (an empty walk would pass it vacuously)."""
    lines = module_lines()
    assert len(lines) > 400
    assert 400 < lines["broker/server/replica_manager.py"] <= MAX_LINES
    assert 400 < lines["tests/broker/log/test_log.py"] <= MAX_LINES  # the tests are counted too
