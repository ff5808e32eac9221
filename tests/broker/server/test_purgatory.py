"""The purgatory: operations complete once ready after a notify (on the purgatory's thread, or on the
notifying thread at the end of its ``completing_here`` block), at their deadline, or at shutdown; once."""

from __future__ import annotations

import threading
import time

import pytest

from broker.record.topic_partition import TopicPartition
from broker.server.delayed_operation import DelayedOperation
from broker.server.purgatory import Purgatory

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


class Waiter(DelayedOperation):
    def __init__(self, keys: list[TopicPartition], timeout_ms: int, state: dict[str, int]) -> None:
        super().__init__(keys, timeout_ms)
        self.state = state
        self.outcomes: list[bool] = []
        self.threads: list[int] = []
        self.done = threading.Event()

    def ready(self) -> bool:
        return self.state["value"] >= self.state["needed"]

    def on_complete(self, *, expired: bool) -> None:
        self.outcomes.append(expired)
        self.threads.append(threading.get_ident())
        self.done.set()


def test_ready_at_once_completes_without_waiting() -> None:
    purgatory = Purgatory("test")
    try:
        op = Waiter([TP], 60_000, {"value": 1, "needed": 1})
        purgatory.watch(op)
        assert op.outcomes == [False]
        assert purgatory.pending() == 0
    finally:
        purgatory.shutdown()


def test_notify_completes_only_the_watchers_of_that_partition() -> None:
    purgatory = Purgatory("test")
    try:
        state = {"value": 0, "needed": 3}
        mine, theirs = Waiter([TP], 60_000, state), Waiter([OTHER], 60_000, dict(state))
        purgatory.watch(mine)
        purgatory.watch(theirs)
        state["value"] = 3
        purgatory.notify(TP)
        assert mine.done.wait(5)
        time.sleep(0.1)
        assert mine.outcomes == [False]
        assert theirs.outcomes == []
        # a second notify never completes it twice
        purgatory.notify(TP)
        time.sleep(0.1)
        assert mine.outcomes == [False]
    finally:
        purgatory.shutdown()
    assert theirs.outcomes == [True]  # completed (expired) at shutdown


def test_deadline_expires_the_operation() -> None:
    purgatory = Purgatory("test")
    try:
        op = Waiter([TP], 200, {"value": 0, "needed": 1})
        started = time.monotonic()
        purgatory.watch(op)
        assert op.done.wait(5)
        assert time.monotonic() - started >= 0.19
        assert op.outcomes == [True]
        time.sleep(0.05)
        assert purgatory.pending() == 0
    finally:
        purgatory.shutdown()


def test_many_concurrent_notifies_complete_each_operation_once() -> None:
    purgatory = Purgatory("test")
    try:
        state = {"value": 0, "needed": 1}
        ops = [Waiter([TopicPartition("t", i % 4)], 60_000, state) for i in range(200)]
        for op in ops:
            purgatory.watch(op)
        state["value"] = 1

        def notify_often(partition: int) -> None:
            for _ in range(50):
                purgatory.notify(TopicPartition("t", partition))

        threads = [threading.Thread(target=notify_often, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for op in ops:
            assert op.done.wait(5)
        time.sleep(0.1)
        assert [len(op.outcomes) for op in ops] == [1] * 200
        assert all(op.outcomes == [False] for op in ops)
    finally:
        purgatory.shutdown()


def test_a_notify_outside_a_block_completes_on_the_purgatory_thread() -> None:
    purgatory = Purgatory("test")
    try:
        state = {"value": 0, "needed": 1}
        op = Waiter([TP], 60_000, state)
        purgatory.watch(op)
        state["value"] = 1
        purgatory.notify(TP)
        assert op.done.wait(5)
        assert op.outcomes == [False]
        assert op.threads != [threading.get_ident()]
    finally:
        purgatory.shutdown()


def test_a_notify_inside_a_block_completes_on_this_thread_when_the_block_ends() -> None:
    purgatory = Purgatory("test")
    try:
        state = {"value": 0, "needed": 1}
        mine, theirs = Waiter([TP], 60_000, state), Waiter([OTHER], 60_000, state)
        purgatory.watch(mine)
        purgatory.watch(theirs)
        with purgatory.completing_here():
            state["value"] = 1
            purgatory.notify(TP)
            with purgatory.completing_here():  # an inner block leaves the checks to the outer one
                purgatory.notify(TP)
            time.sleep(0.2)  # the purgatory's thread was not told: nothing completes meanwhile
            assert mine.outcomes == []
        assert mine.outcomes == [False]  # at the end of the block, before it returned
        assert mine.threads == [threading.get_ident()]
        assert theirs.outcomes == []  # ready too, but its partition was not notified
        assert purgatory.pending() == 2  # completed ones leave the deadline queue at their deadline
        purgatory.notify(OTHER)  # outside a block again: the purgatory's thread
        assert theirs.done.wait(5)
        assert theirs.threads != [threading.get_ident()]
    finally:
        purgatory.shutdown()
    assert mine.outcomes == [False]


def test_a_block_that_raises_still_completes_what_its_changes_made_ready() -> None:
    purgatory = Purgatory("test")
    try:
        state = {"value": 0, "needed": 1}
        op = Waiter([TP], 60_000, state)
        purgatory.watch(op)

        def change_then_fail() -> None:
            with purgatory.completing_here():
                state["value"] = 1
                purgatory.notify(TP)
                raise RuntimeError("the append failed after the change")

        with pytest.raises(RuntimeError, match="the append failed after the change"):
            change_then_fail()
        assert op.outcomes == [False]
        assert op.threads == [threading.get_ident()]
        # the thread left its block: its next notify goes to the purgatory's thread again
        other = Waiter([OTHER], 60_000, {"value": 0, "needed": 1})
        purgatory.watch(other)
        other.state["value"] = 1
        purgatory.notify(OTHER)
        assert other.done.wait(5)
        assert other.threads != [threading.get_ident()]
    finally:
        purgatory.shutdown()


def test_an_earlier_deadline_watched_after_a_later_one_still_expires() -> None:
    purgatory = Purgatory("test")
    try:
        late = Waiter([TP], 60_000, {"value": 0, "needed": 1})
        purgatory.watch(late)
        early = Waiter([OTHER], 300, {"value": 0, "needed": 1})
        started = time.monotonic()
        purgatory.watch(early)
        assert early.done.wait(5)
        assert time.monotonic() - started >= 0.29
        assert early.outcomes == [True]
        assert late.outcomes == []
    finally:
        purgatory.shutdown()
    assert late.outcomes == [True]
