"""The idempotent producer's error cases on the wire: batches no well-behaved client sends, written with
kafka-python's protocol classes on a raw socket (:mod:`tests.conformance.raw_requests`), so the transcript
holds exactly what the broker answers (every field of the Produce response) without a client's retries.

Each scenario asks InitProducerId v4 (no transactional id) for a producer id, then sends Produce v9 requests
(acks=all) of one batch each on one connection to a 1-partition topic, and finally reads the partition back
from offset 0 with kafka-python. Producer ids differ between brokers: the transcript says only whether an
answer's id is the one the producer holds.

* ``producer_sequence_errors``: batches of epoch 0 at sequences 0-2 and 3-4, then a gap (sequence 7 where 5
  is next: OUT_OF_ORDER_SEQUENCE_NUMBER), the last batch and the first batch sent again (duplicates:
  answered with their original base offsets, nothing appended), a batch overlapping the last one (4-5: not
  a duplicate, out of order), then sequence 5 in order. A second producer id's first batch at sequence 7
  (a producer the partition does not know is accepted at any sequence, KIP-360).
* ``producer_fenced_epoch``: epoch 0 writes sequences 0-1; InitProducerId v4 with that producer id and
  epoch (KIP-360's request to bump it, as librdkafka sends after a sequence error) answers a new producer
  id at epoch 0 on both brokers: a producer without a transactional id is not bumped by the broker, it
  bumps its epoch itself (Kafka's idempotent producer since 2.5). So epoch 1 then writes from sequence 0;
  after it a batch of epoch 0 (new, and a resend of epoch 0's batch) is fenced with INVALID_PRODUCER_EPOCH,
  epoch 2 starting at sequence 5 is out of order (a new epoch starts at 0), epoch 1's batch sent again is
  a duplicate and its next batch is appended.
"""

from __future__ import annotations

import time
from typing import Any

from tests.conformance.clients import create_topic, kafka_python_read_all
from tests.conformance.conformance import Transcript, conform
from tests.conformance.raw_requests import (
    exchange,
    idempotent_batch,
    init_producer_id_answer,
    init_producer_id_frame,
    produce_answer,
    produce_frame,
)
from tests.conformance.target import Target

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
#: REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
RETRIABLE = {7, 14, 15}


def _leader(target: Target) -> str:
    return target.bootstrap.split(",")[0]


def _new_producer(target: Target, timeout_s: float = 30.0) -> int:
    """A fresh producer id (epoch 0), asked again while the broker answers a retriable error (a fresh
    Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its controller has granted it a block of ids)."""
    deadline = time.monotonic() + timeout_s
    while True:
        [answer] = exchange(_leader(target), [init_producer_id_frame(1)])
        assert answer is not None, f"{target.name} did not answer InitProducerId"
        error_code, producer_id, epoch = init_producer_id_answer(answer)
        if error_code not in RETRIABLE or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (error_code, epoch) == (0, 0), (target.name, error_code, producer_id, epoch)
    assert producer_id >= 0, (target.name, producer_id)
    return producer_id


def _produce_steps(target: Target, topic: str, steps: list[tuple[str, int, int, int, int]]) -> dict[str, Any]:
    """Send each step ``(name, producer_id, epoch, base_sequence, count)`` as one Produce (acks=all) on one
    connection; the answer of each by name (its partition's fields but the partition index)."""
    frames = [
        produce_frame(topic, 0, -1, 100 + i, idempotent_batch(producer_id, epoch, sequence, count))
        for i, (_, producer_id, epoch, sequence, count) in enumerate(steps)
    ]
    answers: dict[str, Any] = {}
    for (name, *_), response in zip(steps, exchange(_leader(target), frames), strict=True):
        if response is None:
            answers[name] = None
            continue
        [partition] = produce_answer(response)
        del partition["partition"]
        answers[name] = partition
    return answers


def _log(target: Target, topic: str) -> dict[str, Any]:
    """The partition read from offset 0 by kafka-python."""
    read = kafka_python_read_all(target, topic, 0)
    return {"records": [[r["offset"], r["key"], r["value"]] for r in read["records"]], "error": read["error"]}


def producer_sequence_errors(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic)
    producer = _new_producer(target)
    other = _new_producer(target)
    answers = _produce_steps(
        target,
        topic,
        [
            ("first", producer, 0, 0, 3),
            ("second", producer, 0, 3, 2),
            ("gap", producer, 0, 7, 1),
            ("second_again", producer, 0, 3, 2),
            ("first_again", producer, 0, 0, 3),
            ("overlapping", producer, 0, 4, 2),
            ("in_order", producer, 0, 5, 1),
            ("unknown_producer_at_7", other, 0, 7, 1),
        ],
    )
    return {"created": created, "distinct_ids": producer != other, **answers, "log": _log(target, topic)}


def producer_fenced_epoch(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic)
    producer = _new_producer(target)
    first = _produce_steps(target, topic, [("epoch_0", producer, 0, 0, 2)])
    [answer] = exchange(_leader(target), [init_producer_id_frame(2, producer, 0)])
    bump: Any = None
    if answer is not None:
        error_code, bumped_id, bumped_epoch = init_producer_id_answer(answer)
        bump = {"error_code": error_code, "same_producer_id": bumped_id == producer, "epoch": bumped_epoch}
    answers = _produce_steps(
        target,
        topic,
        [
            ("epoch_1", producer, 1, 0, 2),
            ("epoch_0_after_1", producer, 0, 2, 1),
            ("epoch_0_resent_after_1", producer, 0, 0, 2),
            ("epoch_2_not_at_0", producer, 2, 5, 1),
            ("epoch_1_again", producer, 1, 0, 2),
            ("epoch_1_next", producer, 1, 2, 1),
        ],
    )
    return {"created": created, **first, "init_producer_id_bump": bump, **answers, "log": _log(target, topic)}


def test_producer_sequence_errors(targets: tuple[Target, Target]) -> None:
    transcript = conform(producer_sequence_errors, targets)
    assert transcript["gap"]["error_code"] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (transcript["second_again"]["error_code"], transcript["second_again"]["base_offset"]) == (0, 3)
    assert (transcript["first_again"]["error_code"], transcript["first_again"]["base_offset"]) == (0, 0)
    assert transcript["overlapping"]["error_code"] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert transcript["in_order"]["base_offset"] == 5
    assert transcript["log"]["records"] == [
        *[[i, f"s{i}", f"e0-s{i}"] for i in range(6)],
        [6, "s7", "e0-s7"],
    ]


def test_producer_fenced_epoch(targets: tuple[Target, Target]) -> None:
    transcript = conform(producer_fenced_epoch, targets)
    assert transcript["epoch_0_after_1"]["error_code"] == INVALID_PRODUCER_EPOCH
    assert transcript["epoch_0_resent_after_1"]["error_code"] == INVALID_PRODUCER_EPOCH
    assert transcript["epoch_2_not_at_0"]["error_code"] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (transcript["epoch_1_again"]["error_code"], transcript["epoch_1_again"]["base_offset"]) == (0, 2)
    assert [r[0] for r in transcript["log"]["records"]] == [0, 1, 2, 3, 4]
