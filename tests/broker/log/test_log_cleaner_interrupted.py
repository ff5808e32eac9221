"""The log cleaner interrupted (broker/log/log_cleaner.py, segment_swap.py): recovery finishing or rolling
back a swap a crash interrupted, a pass stopped while a group is swapped leaving every group whole, and
truncation aborting and pausing cleaning."""

from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path

import pytest

from broker.log.cleaner import Cleaner
from broker.log.errors import CleaningAbortedError
from broker.log.log_cleaner_manager import CleaningState
from broker.log.log_verifier import verify_partition
from broker.log.offset_map import OffsetMap
from broker.record.record import Record
from broker.record.topic_partition import TopicPartition
from tests.broker.log.compacted_logs import (
    Op,
    append_ops,
    clean_all,
    first_dirty,
    log_map,
    new_cleaner,
    open_log,
    random_ops,
    read_records,
    replay,
)

# ---------------------------------------------------------------------------------------------- crash states


def _cleaned_pair(tmp_path: Path) -> tuple[Path, Path, list[Op], list[Record]]:
    """A log of four segments (one group) before cleaning, and the same log after, as two folders."""
    rng = random.Random(22)
    ops = random_ops(rng, 4_000, 500, tombstones=0.05)
    log = open_log(tmp_path / "work", segment_bytes=1024 * 1024)
    for quarter in range(4):
        append_ops(log, ops[quarter * 1000 : (quarter + 1) * 1000])
        log.roll()
    log.close()
    before = tmp_path / "before"
    shutil.copytree(tmp_path / "work", before)
    log = open_log(tmp_path / "work", segment_bytes=1024 * 1024)
    log_cleaner, cleaner = new_cleaner(tmp_path / "work", [log])
    assert len(clean_all(log_cleaner, cleaner)) == 1
    cleaned_records = read_records(log)
    log.close()
    return before / "compacted-0", tmp_path / "work" / "compacted-0", ops, cleaned_records


def _segment_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name.endswith(".log")}


@pytest.mark.parametrize(
    ("stage", "rolled_forward"),
    [
        ("cleaned", False),  # step 1: .cleaned files only
        ("index-swapped", False),  # inside step 2: indexes renamed, the log still .cleaned
        ("swapped", True),  # after step 2: all .swap, every old segment present
        ("old-partly-deleted", True),  # inside step 3: the first two old segments unlinked
        ("partly-finished", True),  # inside step 4: the indexes final, the log still .swap, old gone
    ],
)
def test_recovery_finishes_or_rolls_back_an_interrupted_swap(
    tmp_path: Path, stage: str, rolled_forward: bool
) -> None:
    before, after, ops, cleaned_records = _cleaned_pair(tmp_path)
    base = "00000000000000000000"
    cleaned = {
        suffix: (after / f"{base}{suffix}").read_bytes() for suffix in (".log", ".index", ".timeindex")
    }
    crashed = tmp_path / "crashed" / "compacted-0"
    shutil.copytree(before, crashed)
    old_logs = sorted(p for p in crashed.iterdir() if p.suffix == ".log")
    assert len(old_logs) == 5  # four full segments and the empty active one
    if stage == "cleaned":
        for suffix, data in cleaned.items():
            (crashed / f"{base}{suffix}.cleaned").write_bytes(data)
    elif stage == "index-swapped":
        (crashed / f"{base}.log.cleaned").write_bytes(cleaned[".log"])
        (crashed / f"{base}.index.swap").write_bytes(cleaned[".index"])
        (crashed / f"{base}.timeindex.swap").write_bytes(cleaned[".timeindex"])
    else:
        for suffix, data in cleaned.items():
            (crashed / f"{base}{suffix}.swap").write_bytes(data)
        if stage == "old-partly-deleted":
            for path in old_logs[:2]:
                for suffix in (".log", ".index", ".timeindex"):
                    path.with_suffix(suffix).unlink()
        if stage == "partly-finished":
            for path in old_logs[:4]:
                for suffix in (".log", ".index", ".timeindex"):
                    path.with_suffix(suffix).unlink()
            (crashed / f"{base}.index.swap").rename(crashed / f"{base}.index")
            (crashed / f"{base}.timeindex.swap").rename(crashed / f"{base}.timeindex")
    log = open_log(tmp_path / "crashed", segment_bytes=1024 * 1024)
    assert log_map(log) == replay(ops)
    expected = _segment_files(after if rolled_forward else before)
    assert _segment_files(crashed) == expected
    assert [p.name for p in crashed.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    records = read_records(log)
    if rolled_forward:
        assert records == cleaned_records
    else:
        assert [(r.key, r.value) for r in records] == ops
    log.close()


@pytest.mark.parametrize("stopped_in", ["rewrite", "swap"])
def test_a_pass_stopped_while_a_group_is_being_swapped_leaves_every_group_whole(
    tmp_path: Path, stopped_in: str
) -> None:
    """A group's swap runs on the pass's swap thread while the next group is rewritten: a stop in the
    rewrite (with the previous swap in flight or just done) or in a swap (with the next group's
    ``.cleaned`` files written) waits for the swap in flight, deletes the files not swapped, and leaves
    each group either swapped whole or untouched."""
    rng = random.Random(7)
    log = open_log(tmp_path)
    ops = random_ops(rng, 12_000, 500)
    append_ops(log, ops)
    log.roll()
    before = {s.base_offset: s.size_bytes for s in log.segments[:-1]}
    assert len(before) >= 6
    log_cleaner, _ = new_cleaner(tmp_path, [log])
    swap_checks = 0

    def check_done(tp: TopicPartition) -> None:
        nonlocal swap_checks
        if threading.current_thread().name.startswith("lumber-log-cleaner-swap"):
            swap_checks += 1
            if stopped_in == "swap" and swap_checks == 2:
                raise CleaningAbortedError(f"{tp}: stopped in the second swap")
        elif stopped_in == "rewrite" and swap_checks >= 1:
            raise CleaningAbortedError(f"{tp}: stopped in a rewrite")

    cleaner = Cleaner(OffsetMap(4 * 1024 * 1024), io_buffer_bytes=64 * 1024, check_done=check_done)
    to_clean = log_cleaner.manager.grab_filthiest_log()
    assert to_clean is not None
    with pytest.raises(CleaningAbortedError, match=r"stopped in (a rewrite|the second swap)"):
        cleaner.clean(to_clean)
    assert [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    after = {s.base_offset: s.size_bytes for s in log.segments[:-1]}
    swapped = [base for base, size in after.items() if size != before.get(base)]
    assert 1 <= len(swapped) < len(before)
    assert swapped == sorted(after)[: len(swapped)]  # the first groups, in order
    assert set(sorted(before)[len(swapped) :]) <= set(after)  # the others untouched
    assert log_map(log) == replay(ops)
    assert verify_partition(log.dir).damage == ()
    # the same cleaner (its buffers, a read it may have left in flight) finishes the log in its next pass
    log_cleaner.manager.abort_cleaning(log.topic_partition)
    stopped_in = "nowhere"
    to_clean = log_cleaner.manager.grab_filthiest_log()
    assert to_clean is not None
    assert cleaner.clean(to_clean).end_offset == log.log_end_offset
    assert [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    assert log_map(log) == replay(ops)
    assert len(read_records(log)) == len({key for key, _ in ops})  # one record per key: its last
    assert verify_partition(log.dir).damage == ()
    log.close()


def test_truncation_aborts_and_pauses_cleaning_and_moves_the_checkpoint_down(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_ops(log, [(f"k{i % 10}".encode(), b"v") for i in range(1_000)])
    log.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    manager = log_cleaner.manager
    log.set_truncation_guard(manager.paused)
    manager.abort_and_pause(log.topic_partition)
    assert clean_all(log_cleaner, cleaner) == []  # paused
    manager.resume(log.topic_partition)
    assert len(clean_all(log_cleaner, cleaner)) == 1
    assert first_dirty(tmp_path, log) == 1_000
    log.truncate_to(995)  # the cleaned segment is one batch [950, 999]: the whole segment goes
    assert log.log_end_offset <= 995
    assert first_dirty(tmp_path, log) == log.log_end_offset
    # a pass in progress notices an abort at its next check
    to_clean = manager.grab_filthiest_log()
    assert to_clean is None  # nothing dirty: 995 is clean
    append_ops(log, [(b"k1", b"w")] * 100)
    log.roll()
    to_clean = manager.grab_filthiest_log()
    assert to_clean is not None
    aborter = threading.Thread(target=manager.abort_and_pause, args=(log.topic_partition, 5.0))
    aborter.start()
    while manager.state(log.topic_partition) is not CleaningState.ABORTED:
        time.sleep(0.01)
    with pytest.raises(CleaningAbortedError):
        cleaner.clean(to_clean)
    manager.abort_cleaning(log.topic_partition)
    aborter.join(5)
    assert not aborter.is_alive()
    assert [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    log.close()
