"""The broker's fetch sessions (broker/server/fetch_session_cache.py, fetch_context.py, fetch_session.py):
the kind of context each session_id / session_epoch gives, the session's epoch, what an incremental answer
omits, and eviction. The wire (real brokers, kafka-python and Lumber's followers using sessions) is in
test_kafka_apis.py and test_replication.py."""

from __future__ import annotations

import pytest

from broker.log.errors import LogError
from broker.record.topic_partition import TopicPartition
from broker.server.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from broker.server.fetch_context import FetchContext, FetchContextKind
from broker.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, CachedPartition, next_epoch
from broker.server.fetch_session_cache import FetchSessionCache
from broker.server.replica_manager import FetchPartitionResult

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def asked(offset: int, epoch: int = 3) -> CachedPartition:
    return CachedPartition(offset, 1 << 20, epoch)


def result(high_watermark: int, log_start: int = 0, error: LogError | None = None) -> FetchPartitionResult:
    return FetchPartitionResult(error, high_watermark, log_start, None)


def open_session(
    cache: FetchSessionCache, partitions: dict[TopicPartition, int], *, follower: bool = True
) -> int:
    """A full fetch of ``partitions`` (tp -> offset), answered with high watermarks equal to the offsets."""
    requested = {tp: asked(o) for tp, o in partitions.items()}
    context = cache.new_context(0, INITIAL_EPOCH, follower=follower, requested=requested, forgotten=[])
    assert context.kind is FetchContextKind.FULL
    error, session_id, answered = context.answer([result(o) for o in partitions.values()])
    assert error is None
    assert [tp for tp, _ in answered] == list(partitions)
    return session_id


def incremental(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    requested: dict[TopicPartition, int] | None = None,
    forgotten: tuple[TopicPartition, ...] = (),
) -> FetchContext:
    return cache.new_context(
        session_id,
        epoch,
        follower=True,
        requested={tp: asked(o) for tp, o in (requested or {}).items()},
        forgotten=list(forgotten),
    )


def test_a_full_fetch_opens_a_session_and_incremental_fetches_read_all_and_answer_what_changed() -> None:
    cache = FetchSessionCache(10)
    session_id = open_session(cache, {A0: 5, A1: 7, B0: 0})
    assert session_id > 0
    assert (cache.size, cache.partitions_cached) == (1, 3)

    # epoch 1: A0's offset moved; every partition is read, at the session's cached offsets
    context = incremental(cache, session_id, 1, {A0: 9})
    assert context.kind is FetchContextKind.INCREMENTAL
    assert context.reads == [(A0, 9, 1 << 20, 3), (A1, 7, 1 << 20, 3), (B0, 0, 1 << 20, 3)]
    # only A0's high watermark changed (5 -> 9): only A0 is answered
    error, answered_id, answered = context.answer([result(9), result(7), result(0)])
    assert (error, answered_id) == (None, session_id)
    assert [tp for tp, _ in answered] == [A0]

    # epoch 2: nothing asked; A1's log start moved, B0 failed: both answered, A0 not
    context = incremental(cache, session_id, 2)
    failed = LogError("disk gone")
    error, _, answered = context.answer([result(9), result(7, log_start=2), result(0, error=failed)])
    assert [tp for tp, _ in answered] == [A1, B0]
    # B0's error reset what the session remembers of it: answered again once the error is gone
    context = incremental(cache, session_id, 3)
    _, _, answered = context.answer([result(9), result(7, log_start=2), result(0)])
    assert [tp for tp, _ in answered] == [B0]

    # forgetting A1 and B0 leaves A0 only
    context = incremental(cache, session_id, 4, forgotten=(A1, B0))
    assert [r[0] for r in context.reads] == [A0]
    assert cache.partitions_cached == 1
    # forgetting the last partition closes the session: the fetch is sessionless
    context = incremental(cache, session_id, 5, forgotten=(A0,))
    assert context.kind is FetchContextKind.SESSIONLESS
    assert context.reads == []
    assert cache.size == 0


def test_session_errors_unknown_id_and_wrong_epoch() -> None:
    cache = FetchSessionCache(10)
    session_id = open_session(cache, {A0: 0})
    missing = incremental(cache, session_id + 1, 1)
    assert missing.kind is FetchContextKind.SESSION_ERROR
    assert isinstance(missing.error, FetchSessionIdNotFoundError)
    assert missing.answer([]) == (missing.error, 0, [])

    stale = incremental(cache, session_id, 2)  # the session expects epoch 1
    assert isinstance(stale.error, InvalidFetchSessionEpochError)
    assert str(stale.error) == f"fetch session {session_id}: the request's epoch 2 is not the expected 1"
    # the error changed nothing: epoch 1 is still the one expected
    assert incremental(cache, session_id, 1).kind is FetchContextKind.INCREMENTAL


def test_a_fetch_answered_after_a_later_fetch_of_its_session_gets_invalid_epoch() -> None:
    """Two fetches of one session in flight (a duplicate, or a client that gave up waiting): the one
    answered last answers nothing, with INVALID_FETCH_SESSION_EPOCH (Kafka's check at answer time)."""
    cache = FetchSessionCache(10)
    session_id = open_session(cache, {A0: 0})
    first = incremental(cache, session_id, 1)
    second = incremental(cache, session_id, 2)
    error, answered_id, answered = first.answer([result(4)])
    assert isinstance(error, InvalidFetchSessionEpochError)
    assert (answered_id, answered) == (session_id, [])
    error, _, answered = second.answer([result(4)])
    assert error is None
    assert [tp for tp, _ in answered] == [A0]


def test_full_and_sessionless_fetches_close_the_session_they_name() -> None:
    cache = FetchSessionCache(10)
    first = open_session(cache, {A0: 0})
    context = cache.new_context(first, INITIAL_EPOCH, follower=True, requested={A0: asked(0)}, forgotten=[])
    _, second, _ = context.answer([result(0)])
    assert second not in (0, first)
    assert cache.session(first) is None
    assert cache.size == 1
    context = cache.new_context(second, FINAL_EPOCH, follower=True, requested={A0: asked(0)}, forgotten=[])
    assert context.kind is FetchContextKind.SESSIONLESS
    assert context.answer([result(0)])[1] == 0
    assert cache.size == 0


def test_no_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(0)
    context = cache.new_context(0, INITIAL_EPOCH, follower=True, requested={A0: asked(0)}, forgotten=[])
    assert context.kind is FetchContextKind.SESSIONLESS
    assert context.answer([result(0)])[1] == 0


def test_eviction_stale_first_then_by_privilege_and_size() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock_ms=clock)
    consumer = open_session(cache, {A0: 0, A1: 0}, follower=False)
    follower = open_session(cache, {B0: 0}, follower=True)
    # full: a consumer's new session may evict only sessions older than eviction_ms: none yet
    assert open_session(cache, {A0: 0}, follower=False) == 0
    # a follower's session evicts a consumer's at any time
    clock.now_ms += 10
    second_follower = open_session(cache, {A0: 0, A1: 0, B0: 0}, follower=True)
    assert second_follower > 0
    assert cache.session(consumer) is None
    assert cache.evictions == 1
    # young followers' sessions: no one may evict them
    assert open_session(cache, {A0: 0}, follower=True) == 0
    # past eviction_ms, but both used just now: not stale; a session may evict a smaller one, not a larger
    clock.now_ms += 2000
    incremental(cache, follower, 1).answer([result(0)])
    incremental(cache, second_follower, 1).answer([result(0), result(0), result(0)])
    assert open_session(cache, {A0: 0}, follower=False) == 0  # 1 partition < a follower's 1 (privileged)
    bigger = open_session(cache, {A0: 0, A1: 0}, follower=True)  # 2 partitions > the 1 of `follower`
    assert bigger > 0
    assert cache.session(follower) is None
    assert cache.session(second_follower) is not None
    # stale: unused for longer than eviction_ms, evicted by anyone
    clock.now_ms += 1500
    incremental(cache, bigger, 1).answer([result(0), result(0)])
    latecomer = open_session(cache, {A0: 0}, follower=False)
    assert latecomer > 0
    assert cache.session(second_follower) is None
    assert cache.evictions == 3


@pytest.mark.parametrize(("epoch", "after"), [(1, 2), (2**31 - 1, 1), (FINAL_EPOCH, FINAL_EPOCH)])
def test_next_epoch(epoch: int, after: int) -> None:
    assert next_epoch(epoch) == after
