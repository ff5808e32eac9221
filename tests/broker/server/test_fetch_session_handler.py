"""The fetching side of a fetch session (broker/server/fetch_session_handler.py): full then incremental
requests naming only what changed, forgotten partitions, and starting over after each kind of error. The
handler against a real leader: every replicated test (tests/broker/server/test_replication.py)."""

from __future__ import annotations

from broker.protocol import ErrorCode
from broker.protocol.messages.fetch import FetchPartition
from broker.record.topic_partition import TopicPartition
from broker.server.fetch_session_handler import FetchSessionHandler

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def wanted(**offsets: int) -> dict[TopicPartition, FetchPartition]:
    by_name = {"a0": A0, "a1": A1, "b0": B0}
    return {
        by_name[n]: FetchPartition(partition=by_name[n].partition, fetch_offset=o, partition_max_bytes=100)
        for n, o in offsets.items()
    }


def test_a_full_fetch_then_incremental_ones_naming_only_changes() -> None:
    handler = FetchSessionHandler("test")
    first = handler.build(wanted(a0=0, a1=0, b0=0))
    assert (first.session_id, first.session_epoch, first.full) == (0, 0, True)
    assert list(first.to_send) == [A0, A1, B0]
    assert handler.handle_response(first, ErrorCode.NONE, 77, [A0, A1, B0])
    assert (handler.session_id, handler.epoch) == (77, 1)

    second = handler.build(wanted(a0=5, a1=0, b0=0))
    assert (second.session_id, second.session_epoch, second.full) == (77, 1, False)
    assert list(second.to_send) == [A0]
    assert second.to_send[A0].fetch_offset == 5
    assert second.to_forget == []
    assert handler.handle_response(second, ErrorCode.NONE, 77, [A0])  # A1 and B0 unchanged: omitted
    assert handler.epoch == 2

    third = handler.build(wanted(a0=5, b0=3))
    assert list(third.to_send) == [B0]
    assert third.to_forget == [A1]
    assert handler.handle_response(third, ErrorCode.NONE, 77, [])
    nothing = handler.build(wanted(a0=5, b0=3))
    assert (nothing.session_epoch, nothing.to_send, nothing.to_forget) == (3, {}, [])


def test_a_partition_outside_the_session_or_a_short_full_answer_starts_over() -> None:
    handler = FetchSessionHandler("test")
    first = handler.build(wanted(a0=0, a1=0))
    assert not handler.handle_response(first, ErrorCode.NONE, 5, [A0])  # A1 left out of a full answer
    assert (handler.session_id, handler.epoch) == (0, 0)
    again = handler.build(wanted(a0=0, a1=0))
    assert again.full
    assert handler.handle_response(again, ErrorCode.NONE, 5, [A0, A1])
    step = handler.build(wanted(a0=1, a1=0))
    assert not handler.handle_response(step, ErrorCode.NONE, 5, [A0, B0])  # B0 is not in the session
    closing = handler.build(wanted(a0=1, a1=0))
    assert (closing.session_id, closing.session_epoch) == (5, 0)  # closes session 5, opens a new one
    assert list(closing.to_send) == [A0, A1]


def test_session_errors_and_failed_sends() -> None:
    handler = FetchSessionHandler("test")
    first = handler.build(wanted(a0=0))
    assert handler.handle_response(first, ErrorCode.NONE, 9, [A0])
    step = handler.build(wanted(a0=1))
    assert not handler.handle_response(step, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    assert (handler.session_id, handler.epoch) == (0, 0)  # evicted: a full fetch opening a new session

    reopened = handler.build(wanted(a0=1))
    assert handler.handle_response(reopened, ErrorCode.NONE, 10, [A0])
    step = handler.build(wanted(a0=2))
    assert not handler.handle_response(step, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 10, [])
    assert (handler.session_id, handler.epoch) == (10, 0)  # close session 10, open a new one

    reopened = handler.build(wanted(a0=2))
    assert handler.handle_response(reopened, ErrorCode.NONE, 11, [A0])
    handler.build(wanted(a0=3))
    handler.handle_error()  # the answer may be lost
    retry = handler.build(wanted(a0=3))
    assert (retry.session_id, retry.session_epoch, list(retry.to_send)) == (11, 0, [A0])

    # a leader that keeps no sessions answers 0: every fetch stays full
    assert handler.handle_response(retry, ErrorCode.NONE, 0, [A0])
    assert handler.build(wanted(a0=4)).full
