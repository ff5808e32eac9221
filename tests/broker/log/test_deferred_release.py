"""DeferredRelease: held for the delay, dropped on its own thread, which ends when nothing is held; close()
drops everything at once; and the cleaner's replaced segments stay open until then."""

from __future__ import annotations

import threading
import time
import weakref
from pathlib import Path

from broker.log.deferred_release import DeferredRelease
from tests.broker.log.compacted_logs import (
    append_ops,
    clean_all,
    new_cleaner,
    open_log,
    shut_down_cleaners,
)


class Item:
    """Records the thread that dropped its last reference."""

    def __init__(self, dropped_by: list[str]) -> None:
        weakref.finalize(self, lambda: dropped_by.append(threading.current_thread().name))


def release_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "test-release"]


def wait_until(predicate: object, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_items_are_held_for_the_delay_then_dropped_on_its_thread_which_then_ends() -> None:
    dropped_by: list[str] = []
    release = DeferredRelease(300, name="test-release")
    started = time.monotonic()
    release.later([Item(dropped_by), Item(dropped_by)])
    release.later([Item(dropped_by)])
    assert release.held() == 3
    assert dropped_by == []
    assert len(release_threads()) == 1
    assert wait_until(lambda: len(dropped_by) == 3)
    assert time.monotonic() - started >= 0.3
    assert dropped_by == ["test-release"] * 3
    assert release.held() == 0
    assert wait_until(lambda: release_threads() == [])  # nothing held: no thread kept
    release.later([Item(dropped_by)])  # a new thread for the next ones
    assert wait_until(lambda: len(dropped_by) == 4)
    assert dropped_by[-1] == "test-release"


def test_close_drops_everything_at_once_and_holds_nothing_after() -> None:
    dropped_by: list[str] = []
    release = DeferredRelease(60_000, name="test-release")
    release.later([Item(dropped_by), Item(dropped_by)])
    assert release.held() == 2
    release.close()
    assert dropped_by == [threading.current_thread().name] * 2
    assert release.held() == 0
    release.later([Item(dropped_by)])  # after close: not held
    assert release.held() == 0
    assert len(dropped_by) == 3
    assert wait_until(lambda: release_threads() == [])


def test_a_delay_of_zero_holds_nothing() -> None:
    dropped_by: list[str] = []
    release = DeferredRelease(0, name="test-release")
    release.later([Item(dropped_by)])
    assert release.held() == 0
    assert dropped_by == [threading.current_thread().name]
    assert release_threads() == []


def deleted_files_open(directory: Path) -> list[str]:
    """This process's descriptors of unlinked files that were in ``directory``."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith(str(directory)) and target.endswith(" (deleted)"):
            found.append(target)
    return found


def test_the_segments_a_pass_replaced_stay_open_until_the_delay_or_the_shutdown(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_ops(log, [(f"k{i % 10}".encode(), b"v" * 100) for i in range(3_000)])
    log.roll()
    before = len(log.segments)
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    assert len(clean_all(log_cleaner, cleaner)) == 1
    replaced = log_cleaner.replaced.held()
    assert replaced == before - 1  # every segment but the active one was cleaned and swapped out
    # three files a segment (log, offset index, time index), unlinked at the swap, still open
    assert len(deleted_files_open(log.dir)) == 3 * replaced
    log_cleaner.shutdown()
    assert log_cleaner.replaced.held() == 0
    assert deleted_files_open(log.dir) == []
    log.close()


def test_the_cleaners_of_a_test_let_their_replaced_segments_go_when_it_ends(tmp_path: Path) -> None:
    """What ``conftest.py`` does after each test (``shut_down_cleaners``): without it, every cleaning test
    left its replaced segments open for 60 s, over a thousand descriptors in one process at once."""
    log = open_log(tmp_path)
    append_ops(log, [(f"k{i % 10}".encode(), b"v" * 100) for i in range(3_000)])
    log.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    assert len(clean_all(log_cleaner, cleaner)) == 1
    log.close()
    assert len(deleted_files_open(log.dir)) == 3 * log_cleaner.replaced.held() > 0
    shut_down_cleaners()
    assert deleted_files_open(log.dir) == []
    assert log_cleaner.replaced.held() == 0
