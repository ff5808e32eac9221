"""The audit outbox's journal (a real file): replay, a torn or corrupted tail truncated exactly, the
counter's recovery (same counter id, same event ids, counts not taken yet taken once), counting by source
offset once, compaction, and the lock against a second emitter."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from audit.audit_counter import AuditCounter
from audit.audit_event import producer_event_id
from audit.audit_journal import AuditJournal, frame, journal_path
from audit.errors import AuditError
from broker.client.producer.producer_batch import ProducerBatch
from broker.record.compression import CompressionType

W = 600_000
T0 = 1_795_334_400_000  # 2026-11-22T08:00Z, a window start


def batch(topic: str, *timestamps: int) -> ProducerBatch:
    found = ProducerBatch(topic, 0, CompressionType.NONE, time.monotonic(), keep_records=True)
    for timestamp_ms in timestamps:
        assert found.append(timestamp_ms, None, b"abc", b"", 1 << 20) >= 0
    found.build()
    return found


def counter(path: Path, name: str = "p-new", tier: str = "producer") -> AuditCounter:
    return AuditCounter(
        host="web-1",
        counter=name,
        window_ms=W,
        audit_topic="_audit",
        clock_ms=lambda: T0 + 5 * W,
        tier="producer" if tier == "producer" else "mirror",
        journal=AuditJournal.open(path),
    )


def test_a_restarted_counter_republishes_the_unconfirmed_events_with_their_ids_and_takes_the_rest_once(
    tmp_path: Path,
) -> None:
    path = journal_path(tmp_path, "producer", "app-1")
    first = counter(path, "p-first")
    first.count_batch(batch("pv", T0 + 1, T0 + 2, T0 + W + 3), None)
    taken1 = first.take()  # sequence 1: confirmed below
    first.count_batch(batch("pv", T0 + 4), None)
    taken2 = first.take()  # sequence 2: sent, never confirmed
    first.published(1)
    first.count_batch(batch("pv", T0 + 5, T0 + 6), None)
    first.count_batch(batch("click", T0 + W + 7), None)  # counted, never taken: then kill -9
    assert [e.count for e in taken1] == [2, 1]
    assert [e.count for e in taken2] == [1]

    killed(first)  # the journal is all that is left of it
    second = counter(path, "p-second")  # the journal's counter id wins
    assert second.counter == "p-first"
    recovered = second.recovered()
    assert [(e.topic, e.window_start_ms, e.count, e.sequence) for e in recovered] == [
        ("pv", T0, 1, 2),
        ("click", T0 + W, 1, 3),
        ("pv", T0, 2, 3),
    ]
    assert recovered[0] == taken2[0]  # the very event (id, emission time) published again
    assert recovered[1].event_id == producer_event_id("web-1", "p-first", "click", T0 + W, W, 3)
    second.count_batch(batch("pv", T0 + 8), None)
    assert [(e.count, e.sequence) for e in second.take()] == [(1, 4)]
    assert second.recovered() == []

    killed(second)
    third = counter(path)  # nothing confirmed since: 2, 3 and 4 are published again, 5 is next
    assert sorted({e.sequence for e in third.recovered()}) == [2, 3, 4]
    third.published(2)
    third.published(3)
    third.published(4)
    killed(third)
    assert counter(path).recovered() == []


def killed(old: AuditCounter) -> None:
    """Closing the file writes nothing: what is left is what a kill -9 leaves (and the lock is gone)."""
    assert old.journal is not None
    old.journal.close()


@pytest.mark.parametrize(
    ("damage", "reason", "kept_last"),
    [
        (lambda data: data[:-3], "a frame payload cut short", False),
        (lambda data: data + b"\x00\x00", "a frame header cut short (2 of 8 bytes)", True),
        (lambda data: data[:-1] + bytes([data[-1] ^ 0x01]), "a CRC mismatch", False),
        (lambda data: data[:-30] + b"{" * 30, "a CRC mismatch", False),
    ],
    ids=["torn payload", "torn header", "flipped bit", "garbage"],
)
def test_a_torn_or_corrupted_tail_is_truncated_exactly_at_the_last_whole_frame(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: object, reason: str, kept_last: bool
) -> None:
    path = journal_path(tmp_path, "producer", "app-1")
    first = counter(path, "p-first")
    first.count_batch(batch("pv", T0 + 1, T0 + 2), None)
    assert first.journal is not None
    first.journal.close()
    whole = path.stat().st_size
    first_frames = path.read_bytes()
    last = frame({"k": "count", "c": [["pv", T0, 40, 120, 0]]})  # a count that did not make it whole
    path.write_bytes(damage(first_frames + last))  # type: ignore[operator]
    damaged_size = path.stat().st_size
    good = whole + len(last) if kept_last else whole
    with caplog.at_level(logging.WARNING, logger="audit.audit_journal"):
        second = counter(path)
    assert reason in caplog.text
    assert f"at offset {good}; truncated there, {damaged_size - good} bytes dropped" in caplog.text
    assert path.read_bytes()[:good] == (first_frames + last)[:good]
    # the torn count is not there (an intact one is); then the recovery's take and open were appended
    assert [(e.count, e.sequence) for e in second.recovered()] == [(42 if kept_last else 2, 1)]


def test_the_mirror_counts_each_source_offset_once_across_a_restart(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "mirror", "mirror-m")
    first = counter(path, "m-1", tier="mirror")
    assert first.count_offsets("pv", 0, [(o, T0 + o, 3) for o in range(10)]) == 10
    assert first.count_offsets("pv", 0, [(o, T0 + o, 3) for o in range(20, 25)]) == 5
    assert first.count_offsets("pv", 1, [(o, T0 + o, 3) for o in range(4)]) == 4
    assert first.count_offsets("_audit", 0, [(0, T0, 3)]) == 0
    killed(first)
    second = counter(path, tier="mirror")  # restarted from the committed offset 5: copies 5..29 again
    assert [(e.topic, e.count) for e in second.recovered()] == [("pv", 19)]
    assert second.count_offsets("pv", 0, [(o, T0 + o, 3) for o in range(5, 30)]) == 15  # 10..19, 25..29
    assert second.recopied == 10
    assert second.count_offsets("pv", 1, [(o, T0 + o, 3) for o in range(6)]) == 2
    assert [e.count for e in second.take()] == [17]


def test_compaction_keeps_the_state_and_a_second_emitter_of_the_same_name_is_refused(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "mirror", "mirror-m")
    first = counter(path, "m-1", tier="mirror")
    assert first.journal is not None
    first.journal.compact_bytes = 2_000
    for n in range(40):
        first.count_offsets("pv", 0, [(n * 10 + o, T0 + o, 3) for o in range(10)])
        first.take()
        if n != 17:
            first.published(n + 1)
    assert path.stat().st_size < 4_000  # rewritten as its state, not 40 rounds of entries
    with pytest.raises(AuditError, match="is in use by another emitter"):
        AuditJournal.open(path)
    first.count_offsets("pv", 0, [(400 + o, T0, 3) for o in range(5)])  # counted, not taken
    killed(first)
    assert not path.with_name(path.name + ".tmp").exists()
    second = counter(path, tier="mirror")
    assert second.counter == "m-1"
    assert [(e.sequence, e.count) for e in second.recovered()] == [(18, 10), (41, 5)]
    assert second.count_offsets("pv", 0, [(o, T0, 3) for o in range(410)]) == 5  # only 405..409
