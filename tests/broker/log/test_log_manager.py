from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from broker.config import LogConfig
from broker.log import file_handle, log_flush, log_manager
from broker.log.errors import LogClosedError, LogDirLockedError
from broker.log.log_manager import LogManager
from broker.record.errors import InvalidTopicError
from broker.record.topic_partition import TopicPartition
from tests.broker.log.helpers import BASE_TS, assert_records_match, make_batch, read_all
from tests.broker.log.test_producer_state import idempotent_batch

DAY_MS = 24 * 3600 * 1000


def manager_config(*dirs: Path, **overrides: object) -> LogConfig:
    values: dict[str, object] = {"log_dirs": [str(d) for d in dirs]}
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def test_creates_partitions_and_finds_them_again(tmp_path: Path) -> None:
    with LogManager(manager_config(tmp_path)) as manager:
        log = manager.get_or_create_log("clicks", 2)
        assert manager.get_or_create_log("clicks", 2) is log
        assert manager.get_log("clicks", 2) is log
        assert manager.get_log("clicks", 3) is None
        assert log.dir == tmp_path / "clicks-2"
        log.append(make_batch(0, 5))
        log.flush()
    assert (tmp_path / ".lumber_cleanshutdown").exists()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nclicks 2 5\n"
    with LogManager(manager_config(tmp_path)) as manager:
        assert not (tmp_path / ".lumber_cleanshutdown").exists()  # removed once loaded
        reloaded = manager.get_log("clicks", 2)
        assert reloaded is not None
        assert reloaded.recovery_result.clean_shutdown
        assert reloaded.recovery_result.validated_segments == ()
        assert_records_match(read_all(reloaded), 0, 5)


def test_a_new_logs_folder_is_fsynced_at_its_first_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating a partition fsyncs the log dir (the new folder's entry) but not the folder, whose segment
    files are made with no fsync; the log's first flush fsyncs the folder, once, as Kafka's first flush of a
    new segment does, unless a leader epoch's checkpoint fsynced it meanwhile; a roll makes the next flush
    fsync it again. The real ``fsync_dir`` runs, recorded on the way."""
    synced: list[Path] = []
    real = file_handle.fsync_dir

    def recorded(path: Path) -> None:
        synced.append(path)
        real(path)

    monkeypatch.setattr(log_flush, "fsync_dir", recorded)
    monkeypatch.setattr(log_manager, "fsync_dir", recorded)
    with LogManager(manager_config(tmp_path, segment_bytes=1500)) as manager:
        synced.clear()
        log = manager.get_or_create_log("fresh", 0)
        assert synced == [tmp_path]
        log.flush()  # nothing appended: nothing to make durable
        assert synced == [tmp_path]
        log.append(make_batch(0, 5))
        log.flush()
        assert synced == [tmp_path, tmp_path / "fresh-0"]
        log.append(make_batch(5, 5))
        log.flush()
        assert synced == [tmp_path, tmp_path / "fresh-0"]
        log.append(make_batch(10, 20))  # over segment_bytes: a new segment
        assert len(log.segments) == 2
        log.flush()
        assert synced == [tmp_path, tmp_path / "fresh-0", tmp_path / "fresh-0"]
        synced.clear()
        again = manager.get_or_create_log("fresh", 0)
        assert again is log
        assert synced == []
        led = manager.get_or_create_log("led", 0)
        led.assign_epoch_start_offset(0, 0)  # its checkpoint fsyncs itself and the folder, as Kafka's
        led.append(make_batch(0, 5), leader_epoch=0)
        led.flush()
        assert synced == [tmp_path]  # the log dir at creation; the folder by the checkpoint, not again


def test_without_the_clean_marker_recovery_starts_at_the_checkpoint(tmp_path: Path) -> None:
    with LogManager(manager_config(tmp_path, segment_bytes=1300)) as manager:
        log = manager.get_or_create_log("clicks", 0)
        for _ in range(6):
            log.append(make_batch(log.log_end_offset, 5))
        log.flush()
        manager.checkpoint_recovery_points()
        log.append(make_batch(30, 5))
    (tmp_path / ".lumber_cleanshutdown").unlink()  # as if the broker had crashed
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nclicks 0 30\n")
    with LogManager(manager_config(tmp_path, segment_bytes=1300)) as manager:
        reloaded = manager.get_log("clicks", 0)
        assert reloaded is not None
        result = reloaded.recovery_result
        assert not result.clean_shutdown
        assert result.recovery_point == 30
        assert result.validated_segments == (30,)
        assert reloaded.log_end_offset == 35


def test_a_second_manager_on_the_same_dir_fails_clearly(tmp_path: Path) -> None:
    other = tmp_path / "other"
    with LogManager(manager_config(tmp_path)):
        with pytest.raises(LogDirLockedError) as info:
            LogManager(manager_config(other, tmp_path))
        assert str(tmp_path / ".lock") in str(info.value)
        assert "only one broker may use a log dir" in str(info.value)
        # the failed start released what it had locked
        with LogManager(manager_config(other)):
            pass
    with LogManager(manager_config(tmp_path)):
        pass


@pytest.mark.parametrize("topic", ["../x", "a/b", ".", "..", "", "x" * 250, "a b", "/etc/passwd", "..\\x"])
def test_topic_names_are_validated_and_cannot_escape(tmp_path: Path, topic: str) -> None:
    log_dir = tmp_path / "logs"
    with LogManager(manager_config(log_dir)) as manager:
        with pytest.raises(InvalidTopicError):
            manager.get_or_create_log(topic, 0)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
        assert sorted(p.name for p in log_dir.iterdir()) == [".lock", "recovery-point-offset-checkpoint"]


def test_partition_numbers_are_validated(tmp_path: Path) -> None:
    with (
        LogManager(manager_config(tmp_path)) as manager,
        pytest.raises(InvalidTopicError, match="partition -1"),
    ):
        manager.get_or_create_log("t", -1)


def test_partitions_spread_over_log_dirs(tmp_path: Path) -> None:
    first, second = tmp_path / "d1", tmp_path / "d2"
    with LogManager(manager_config(first, second)) as manager:
        logs = [manager.get_or_create_log("t", p) for p in range(4)]
        assert [log.dir.parent for log in logs] == [first, second, first, second]
        assert [log.topic_partition for log in manager.all_logs()] == [
            TopicPartition("t", p) for p in range(4)
        ]
    with LogManager(manager_config(first, second)) as manager:
        assert len(manager.all_logs()) == 4


def test_delete_topic_and_log(tmp_path: Path) -> None:
    with LogManager(manager_config(tmp_path)) as manager:
        for partition in range(3):
            manager.get_or_create_log("doomed", partition).append(make_batch(0, 2))
        kept = manager.get_or_create_log("kept", 0)
        region_log = manager.get_or_create_log("doomed", 0)
        region = region_log.read(0, 100, max_offset=2)
        assert region is not None
        assert manager.delete_log("doomed", 2)
        assert not manager.delete_log("doomed", 2)
        assert manager.delete_topic("doomed") == 2
        assert [log.topic_partition for log in manager.all_logs()] == [kept.topic_partition]
        assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["kept-0"]
        assert len(region.read_bytes()) == region.size_bytes  # an in-flight read still completes
        with pytest.raises(LogClosedError):
            region_log.append(make_batch(2, 1))


def test_an_interrupted_deletion_is_finished_at_start(tmp_path: Path) -> None:
    leftover = tmp_path / "gone-0.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "stray-folder").mkdir()
    with LogManager(manager_config(tmp_path)) as manager:
        assert manager.all_logs() == []
    assert not leftover.exists()
    assert (tmp_path / "stray-folder").exists()


def test_background_flusher_flushes_by_time(tmp_path: Path) -> None:
    with LogManager(manager_config(tmp_path, expose="flushed", flush_ms=50, flush_messages=10**6)) as manager:
        manager.start()
        log = manager.get_or_create_log("t", 0)
        log.append(make_batch(0, 3))
        assert log.high_watermark == 0
        assert log.wait_for_flushed(3, timeout_s=10)
        assert log.high_watermark == 3


def test_background_flusher_flushes_by_message_count(tmp_path: Path) -> None:
    with LogManager(manager_config(tmp_path, expose="flushed", flush_ms=10**9, flush_messages=10)) as manager:
        manager.start()
        log = manager.get_or_create_log("t", 0)
        log.append(make_batch(0, 5))
        assert not log.wait_for_flushed(5, timeout_s=0.3)  # 5 < M and S is far away
        log.append(make_batch(5, 5))
        assert log.wait_for_flushed(10, timeout_s=10)


def test_listeners_reach_every_log_present_and_future(tmp_path: Path) -> None:
    seen: list[tuple[TopicPartition, int]] = []
    # the paper's exposure: listeners hear the flushed offsets (with "appended" they hear every append)
    with LogManager(manager_config(tmp_path, expose="flushed")) as manager:
        first = manager.get_or_create_log("a", 0)
        manager.add_listener(lambda tp, hw: seen.append((tp, hw)))
        second = manager.get_or_create_log("b", 0)
        first.append(make_batch(0, 2))
        second.append(make_batch(0, 3))
        first.flush()
        second.flush()
    assert seen == [(TopicPartition("a", 0), 2), (TopicPartition("b", 0), 3)]


class FakeClock:
    def __init__(self, now_ms: int = BASE_TS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def test_retention_with_an_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    config = manager_config(tmp_path, segment_bytes=1300, retention_ms=2 * DAY_MS, expose="appended")
    with LogManager(config, clock=clock) as manager:
        log = manager.get_or_create_log("t", 0)
        for day in range(4):
            for _ in range(2):
                log.append(make_batch(log.log_end_offset, 5, timestamp_ms=BASE_TS + day * DAY_MS))
        assert [s.base_offset for s in log.segments] == [0, 10, 20, 30]
        assert manager.apply_retention() == {}
        clock.now_ms = BASE_TS + 2 * DAY_MS + 5  # day 0 newest record (BASE_TS + 4) is now 2 days + 1 ms old
        assert manager.apply_retention() == {TopicPartition("t", 0): (0,)}
        clock.now_ms = BASE_TS + 10 * DAY_MS
        assert manager.apply_retention() == {TopicPartition("t", 0): (10, 20)}
        assert log.log_start_offset == 30


def test_retention_thread_runs(tmp_path: Path) -> None:
    config = manager_config(
        tmp_path, segment_bytes=1300, retention_ms=DAY_MS, retention_check_interval_ms=20, expose="appended"
    )
    with LogManager(config) as manager:
        manager.start()
        log = manager.get_or_create_log("t", 0)
        for _ in range(6):
            log.append(make_batch(log.log_end_offset, 5, timestamp_ms=1000))  # 1970: long expired
        deadline = time.monotonic() + 10
        while log.log_start_offset != 20 and time.monotonic() < deadline:  # it may take several passes
            time.sleep(0.01)
        assert log.log_start_offset == 20  # all but the active segment


def test_close_stops_threads_and_is_idempotent(tmp_path: Path) -> None:
    before = set(threading.enumerate())  # other tests' (a cleaner's replaced segments wait their delay)
    manager = LogManager(manager_config(tmp_path, flush_ms=10))
    manager.start()
    log = manager.get_or_create_log("t", 0)
    log.append(make_batch(0, 1))
    manager.close()
    manager.close()
    assert log.closed
    with pytest.raises(LogClosedError):
        manager.get_or_create_log("t", 1)
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("lumber-log-")]


def test_a_corrupt_checkpoint_means_full_recovery(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with LogManager(manager_config(tmp_path)) as manager:
        manager.get_or_create_log("t", 0).append(make_batch(0, 4))
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    with LogManager(manager_config(tmp_path)) as manager:
        log = manager.get_log("t", 0)
        assert log is not None
        assert not log.recovery_result.clean_shutdown
        assert log.recovery_result.validated_segments == (0,)
        assert log.log_end_offset == 4
    assert "is recovered from its start" in caplog.text


def test_expired_producers_are_forgotten_in_every_log_by_the_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock(BASE_TS)
    with LogManager(manager_config(tmp_path), clock=clock, producer_id_expiration_ms=1000) as manager:
        first = manager.get_or_create_log("t", 0)
        second = manager.get_or_create_log("t", 1)
        first.append(idempotent_batch(7, 0, 0, 1))
        clock.now_ms += 500
        second.append(idempotent_batch(8, 0, 0, 1))
        clock.now_ms += 499
        assert manager.remove_expired_producers() == {}
        clock.now_ms += 1
        assert manager.remove_expired_producers() == {TopicPartition("t", 0): [7]}
        clock.now_ms += 500
        assert manager.remove_expired_producers() == {TopicPartition("t", 1): [8]}


def test_flush_requests_are_answered_by_group_commit(tmp_path: Path) -> None:
    """flush_on_ack: waiters wake the flusher (the policy alone would not flush for a minute) and every
    one of them is answered; those that arrive during an fsync share the next one."""
    config = manager_config(
        tmp_path, flush_ms=60_000, flush_messages=10**9, flush_on_ack=True, expose="flushed"
    )
    with LogManager(config) as manager:
        manager.start()
        log = manager.get_or_create_log("acked", 0)
        flushes: list[int] = []
        log.add_listener(lambda _tp, _hw: flushes.append(log.flushed_offset))
        answered: list[bool] = []

        def producer(n: int) -> None:
            for i in range(10):
                end = log.append(make_batch(n * 100 + i, 3)).last_offset + 1
                log.request_flush(end)
                answered.append(log.wait_for_flushed(end, 10))

        threads = [threading.Thread(target=producer, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answered == [True] * 80
        assert log.flushed_offset == log.log_end_offset == 240
        assert log.request_flush(240) is True  # already on disk: nothing to wait for
        assert 1 <= len(flushes) <= 80
        assert flushes == sorted(flushes)


def test_a_flush_turn_looks_only_at_the_logs_with_something_to_flush(tmp_path: Path) -> None:
    """300 idle logs and 3 appended to, the clock injected: a turn flushes the 3 once due, in partition
    order, then forgets them; an append to a forgotten log makes it dirty again, the next due turn flushes
    it; a deleted dirty log is forgotten without a flush. Idle logs are never looked at."""
    clock = FakeClock()
    clock.now_ms = BASE_TS
    config = manager_config(tmp_path, flush_ms=1000, flush_messages=10**6)
    with LogManager(config, clock=clock) as manager:
        logs = [manager.get_or_create_log("idle", p) for p in range(300)]
        busy = [manager.get_or_create_log("busy", p) for p in (2, 0, 1)]
        for log in busy:
            log.append(make_batch(0, 4))
        assert sorted(str(log.topic_partition) for log in manager._dirty) == ["busy-0", "busy-1", "busy-2"]
        clock.now_ms = BASE_TS + 999
        assert manager.flush_due_logs() == []
        clock.now_ms = BASE_TS + 1000
        assert manager.flush_due_logs() == [TopicPartition("busy", p) for p in range(3)]
        assert [log.flushed_offset for log in busy] == [4, 4, 4]
        assert manager._dirty == set()
        busy[0].append(make_batch(4, 2))
        assert manager._dirty == {busy[0]}
        clock.now_ms = BASE_TS + 1999
        assert manager.flush_due_logs() == []
        clock.now_ms = BASE_TS + 2000
        assert manager.flush_due_logs() == [TopicPartition("busy", 2)]
        assert busy[0].flushed_offset == 6
        logs[7].append(make_batch(0, 1))
        manager.delete_log("idle", 7)
        clock.now_ms = BASE_TS + 5000
        assert manager.flush_due_logs() == []
        assert manager._dirty == set()
