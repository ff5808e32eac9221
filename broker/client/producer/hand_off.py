"""The hand-off between the threads that append records and the producer's sender thread.

An appending thread that has closed batches holding :data:`HANDOFF_WEIGHT` (one per batch and one per
segment, a run of records handed over in one call) since the sender's last pass waits for its next pass, at
most :data:`HANDOFF_WAIT_S`, unless that pass was held back by the brokers (a batch waiting for an answer,
a leader, a producer id or its retry back-off: another pass would not take more), the sender has stopped
(a forced close), or the appending thread is the sender's own (a delivery callback that sends).

Why: the threads share the GIL. Without the hand-off an appending thread keeps it for whole switch
intervals (5 ms) and closes batches faster than the sender takes them, until ``buffer_memory`` is full;
the cyclic garbage collector then scans every buffered batch and record again and again, as they outlive
its young generations. Producing 200-byte records one per batch (``linger_ms`` 0, ``acks=0``), the buffer
held some 100,000 batches and the collector took a third of the producer's CPU; with the hand-off the
buffer holds a few hundred records and the producer sends 1.7x as many records a second (issue 39,
BENCHMARKS.md). Kafka's Java producer has no such wait: its threads run in parallel.

Concurrency: every method runs under the accumulator's lock, on which the ``passed`` condition is made;
:attr:`HandOff.weight` and :attr:`HandOff.held_back` are read and written under it too.
"""

from __future__ import annotations

import threading

#: Batches and segments closed since the sender's last pass that make an appending thread wait for the next.
HANDOFF_WEIGHT = 300
#: The longest an appending thread waits for the sender's pass (the sender may be writing to a slow socket).
HANDOFF_WAIT_S = 0.001


class HandOff:
    """See the module docstring; made by the accumulator, on its lock and its ``work`` condition."""

    def __init__(self, lock: threading.Lock, work: threading.Condition) -> None:
        self._passed = threading.Condition(lock)
        self._work = work
        #: what the batches closed since the sender's last pass weigh (the accumulator adds to it)
        self.weight = 0
        #: whether the sender's last pass left batches it could not take because of the brokers
        self.held_back = False
        self._passes = 0
        self._sender_thread = -1

    def wait_for_sender(self) -> None:
        """Called by an appending thread once :attr:`weight` reaches :data:`HANDOFF_WEIGHT`: wait for the
        sender's next pass unless it was held back (or stopped) or this is its thread."""
        if self.held_back or threading.get_ident() == self._sender_thread:
            return
        passes = self._passes
        self._work.notify()
        self._passed.wait(HANDOFF_WAIT_S)
        if self._passes == passes:  # the sender is busy elsewhere (writing): wait again after its pass
            self.weight = 0

    def pass_begins(self) -> None:
        """The sender starts a pass over the batches: everything closed so far is in it."""
        self._passes += 1
        self.weight = 0
        self._sender_thread = threading.get_ident()
        self._passed.notify_all()
