"""The fast path of the one-partition Produce request (broker/server/produce_fast_path.py), in process on a
real ZooKeeper, a real cluster watcher and real logs: two brokers' protocol layers (the same broker id and
view, each its own log folder), one with the fast path and one without, are given the same request frames
of one connection, and answer the same bytes and write the same segment bytes, for every outcome: appends
(``acks=1`` and ``acks=-1``, idempotent batches and their retries), a corrupt CRC, a bad magic, a record
too large, an idempotent producer's sequence gap, a partition led elsewhere, a request of another shape.
The fast broker's ``taken`` and ``served`` counts say how many requests took the fast path and how many
of them it answered itself, so these tests fail with the path turned off. The acks=0 runs' part of the
module (``serve_run``) is tested on the wire in tests/broker/server/test_replica_manager.py."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from broker.cluster import zk_paths
from broker.cluster.cluster_view import EMPTY_VIEW
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.partition_state import PartitionState
from broker.config import BrokerConfig
from broker.log.log_manager import LogManager
from broker.network.request_channel import NetworkRequest, NetworkResponse, RequestChannel
from broker.protocol import ErrorCode, decode_response, encode_request, encode_response
from broker.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.server.kafka_apis import KafkaApis
from broker.server.purgatory import Purgatory
from broker.server.replica_manager import ReplicaManager
from lumber.dev.process import free_port
from tests.broker.cluster.helpers import add_broker
from tests.broker.log.helpers import config as log_config
from tests.broker.server.helpers import BASE_TS, batch
from tests.support.broker_cluster import wait_for

pytestmark = pytest.mark.zookeeper

TOPIC = "fast"
PRODUCE_KEY = 0
MAX_MESSAGE_BYTES = 8000
CONNECTION = "127.0.0.1:9092-127.0.0.1:50000-0"


class Sink:
    """A processor's side of the request channel: the responses routed to it, in order."""

    def __init__(self) -> None:
        self.responses: list[NetworkResponse] = []

    def enqueue_response(self, response: NetworkResponse) -> None:
        self.responses.append(response)


class Broker:
    """One broker's protocol layer over its own logs, in process."""

    def __init__(self, apis: KafkaApis, sink: Sink, logs: LogManager) -> None:
        self.apis, self.sink, self.logs = apis, sink, logs

    def serve(self, frame: bytes, connection_id: str = CONNECTION) -> bytes | None:
        """The answer to ``frame`` (size prefix removed): its bytes, or None when the connection is closed
        or the request gets no answer."""
        before = len(self.sink.responses)
        self.apis.handle(NetworkRequest(0, connection_id, "127.0.0.1:50000", frame, 0))
        wait_for(lambda: len(self.sink.responses) > before, 10, "the answer")
        [response] = self.sink.responses[before:]
        if response.close_after or not response.chunks:
            return None
        return b"".join(bytes(chunk) for chunk in response.chunks)  # type: ignore[arg-type]

    def serve_pipelined(self, frames: list[bytes]) -> list[bytes | None]:
        """The answers to ``frames`` given together, as a processor gives a read's pipelined requests
        (``KafkaApis.handle_pipelined``), each as :meth:`serve` returns it."""
        before = len(self.sink.responses)
        requests = [NetworkRequest(0, CONNECTION, "127.0.0.1:50000", f, 0) for f in frames]
        self.apis.handle_pipelined(iter(requests))
        wait_for(lambda: len(self.sink.responses) - before >= len(frames), 10, "the answers")
        by_request = {id(r.request): r for r in self.sink.responses[before:]}
        answers: list[bytes | None] = []
        for request in requests:
            response = by_request[id(request)]
            if response.close_after or not response.chunks:
                answers.append(None)
            else:
                answers.append(b"".join(bytes(chunk) for chunk in response.chunks))  # type: ignore[arg-type]
        return answers

    def segment_bytes(self, partition: int = 0) -> bytes:
        log = self.logs.get_log(TOPIC, partition)
        assert log is not None
        return b"".join(path.read_bytes() for path in sorted(log.dir.glob("*.log")))


@contextmanager
def two_brokers(
    zk: Any, tmp_path: Path, leader: int = 0, partitions: int = 1, replicas: tuple[int, ...] = (0,)
) -> Iterator[tuple[Broker, Broker]]:
    """A broker with the fast path and one without, both broker 0 of ``TOPIC``'s ``partitions`` (led by
    ``leader``, in epoch 3)."""
    add_broker(zk, 0, free_port())
    assignment = {p: list(replicas) for p in range(partitions)}
    zk.create(zk_paths.topic_path(TOPIC), zk_paths.encode_assignment(assignment), makepath=True)
    state = PartitionState(leader=leader, leader_epoch=3, isr=replicas, controller_epoch=1)
    for p in range(partitions):
        path = zk_paths.partition_state_path(TOPIC, p)
        zk.create(path, zk_paths.encode_partition_state(state), makepath=True)
    with ExitStack() as stack:
        brokers = []
        for name, enabled in (("fast", True), ("general", False)):
            logs = stack.enter_context(
                LogManager(log_config(tmp_path / name, max_message_bytes=MAX_MESSAGE_BYTES))
            )
            purgatory = Purgatory(name)
            stack.callback(purgatory.shutdown)
            watcher = ClusterWatcher(zk)
            watcher.start()
            stack.callback(watcher.stop)
            wait_for(
                lambda w=watcher: len(w.view.states) == partitions,  # type: ignore[misc]
                10,
                "the partitions' states in the view",
            )
            manager = ReplicaManager(0, logs, watcher, purgatory)
            stack.callback(manager.shutdown)
            manager.apply(EMPTY_VIEW, watcher.view)
            channel = RequestChannel()
            sink = Sink()
            channel.register_processor(0, sink)
            apis = KafkaApis(
                config=BrokerConfig(),
                replica_manager=manager,
                admin_manager=None,  # type: ignore[arg-type]  # no admin request here
                cluster=watcher,
                channel=channel,
                cluster_id="fast-path",
                producer_ids=None,  # type: ignore[arg-type]
                group_coordinator=None,  # type: ignore[arg-type]
            )
            apis.fast_produce.enabled = enabled
            brokers.append(Broker(apis, sink, logs))
        yield brokers[0], brokers[1]


def frame(
    records: bytes,
    correlation_id: int,
    *,
    acks: int = 1,
    version: int = 9,
    partitions: int = 1,
    partition: int = 0,
    timeout_ms: int = 5000,
) -> bytes:
    """A Produce request of ``records`` to ``partition`` (``partitions`` > 1: to partitions 0, 1, ...)."""
    indexes = range(partitions) if partitions > 1 else [partition]
    body = ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[TopicProduceData(TOPIC, [PartitionProduceData(p, records) for p in indexes])],
    )
    return encode_request(version, correlation_id, "fast-producer", body)[4:]


def keyless(count: int, ts: int = BASE_TS) -> bytes:
    """A batch as librdkafka sends it: keyless 100-byte values."""
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(ts + i // 20, None, b"v" * 100)
    return builder.build()


def idempotent(sequence: int, count: int) -> bytes:
    builder = RecordBatchBuilder(
        CompressionType.NONE, producer_id=7, producer_epoch=0, base_sequence=sequence
    )
    for i in range(count):
        builder.append(BASE_TS + i, b"k%d" % i, b"v" * 40)
    return builder.build()


def answer(version: int, correlation_id: int, base_offset: int, log_start_offset: int = 0) -> bytes:
    """The generic encoding of a one-partition success (what both paths must answer)."""
    body = ProduceResponse(
        responses=[
            TopicProduceResponse(
                TOPIC,
                [PartitionProduceResponse(0, 0, base_offset, -1, log_start_offset)],
            )
        ]
    )
    return encode_response(version, correlation_id, body)


def error_of(version: int, answered: bytes | None) -> tuple[int, int]:
    assert answered is not None
    response = decode_response(PRODUCE_KEY, version, answered[4:])
    partition = response.body.responses[0].partition_responses[0]  # type: ignore[union-attr]
    return partition.error_code, partition.base_offset


def test_appends_answer_and_store_the_same_bytes_as_the_general_path(zk: Any, tmp_path: Path) -> None:
    """acks=1 and acks=-1 requests of one connection (each learnt from its first), librdkafka's batches
    of several sizes and keyed ones: the same answers, byte for byte the generic encoding, and the same
    segment bytes (offsets and the leader epoch stamped alike)."""
    frames = [frame(keyless(50), 1), frame(keyless(50, BASE_TS + 5), 2), frame(keyless(7), 3)]
    frames += [frame(batch(0, 3), 4), frame(keyless(50), 5, acks=-1), frame(keyless(1), 6, acks=-1)]
    frames += [frame(keyless(2), 7, version=7), frame(keyless(3), 8, version=7)]
    with two_brokers(zk, tmp_path) as (fast, general):
        answers = [(fast.serve(f), general.serve(f)) for f in frames]
        offsets = [0, 50, 100, 107, 110, 160, 161, 163]
        versions = [9] * 6 + [7] * 2
        for i, (fast_answer, general_answer) in enumerate(answers):
            assert fast_answer == general_answer, i
            assert fast_answer == answer(versions[i], i + 1, offsets[i]), (i, fast_answer, general_answer)
        # the first of each request learnt: 1, 5 and 7 took the general path
        counts = (
            fast.apis.fast_produce.taken,
            fast.apis.fast_produce.served,
            general.apis.fast_produce.taken,
        )
        assert counts == (5, 5, 0)
        stored = fast.segment_bytes()
        assert stored == general.segment_bytes()
        assert len(stored) > 0
        log = fast.logs.get_log(TOPIC, 0)
        assert log is not None
        (leader_epoch,) = struct.unpack_from(">i", stored, 12)  # the first batch's partitionLeaderEpoch
        assert (log.log_end_offset, leader_epoch) == (166, 3)


def test_every_failure_answers_as_the_general_path_and_appends_nothing(zk: Any, tmp_path: Path) -> None:
    """A corrupt CRC, a bad magic, a record too large and an idempotent producer's sequence gap, each
    recognised by the fast path: the general path's answer (code, message), nothing appended, and the
    next good request appended at the next offset; an idempotent retry answers its original offsets."""
    good = keyless(10)
    corrupt = bytearray(keyless(10))
    corrupt[-1] ^= 0xFF
    bad_magic = bytearray(keyless(10))
    bad_magic[16] = 1  # the magic byte: offset 8, length 4, leader epoch 4, then magic
    too_large = keyless(80)  # 80 x ~110 bytes > MAX_MESSAGE_BYTES
    assert len(too_large) > MAX_MESSAGE_BYTES
    frames = [
        frame(good, 1),
        frame(bytes(corrupt), 2),
        frame(bytes(bad_magic), 3),
        frame(too_large, 4),
        frame(good, 5),
        frame(idempotent(0, 2), 6),
        frame(idempotent(5, 2), 7),  # a gap: 2 expected
        frame(idempotent(0, 2), 8),  # a retry of sequence 0: its original offsets
        frame(idempotent(2, 1), 9),
    ]
    with two_brokers(zk, tmp_path) as (fast, general):
        answers = [(fast.serve(f), general.serve(f)) for f in frames]
        for fast_answer, general_answer in answers:
            assert fast_answer == general_answer
        codes = [error_of(9, a) for a, _ in answers]
        assert codes == [
            (0, 0),
            (ErrorCode.CORRUPT_MESSAGE, -1),
            (ErrorCode.CORRUPT_MESSAGE, -1),
            (ErrorCode.MESSAGE_TOO_LARGE, -1),
            (0, 10),
            (0, 20),
            (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
            (0, 20),
            (0, 22),
        ]
        # 2-9 taken; 2, 3, 4 and 7 failed (answered by the general path's builder), 4 answered fast
        assert (fast.apis.fast_produce.taken, fast.apis.fast_produce.served) == (8, 4)
        assert fast.segment_bytes() == general.segment_bytes()


def test_a_partition_led_elsewhere_answers_as_the_general_path(zk: Any, tmp_path: Path) -> None:
    """Broker 0 does not lead: NOT_LEADER_OR_FOLLOWER from both (the second request taken by the fast
    path, answered by the general path's builder), nothing appended."""
    with two_brokers(zk, tmp_path, leader=1) as (fast, general):
        frames = [frame(keyless(5), 1), frame(keyless(5), 2)]
        answers = [(fast.serve(f), general.serve(f)) for f in frames]
        for fast_answer, general_answer in answers:
            assert fast_answer == general_answer
            assert fast_answer is not None
            assert error_of(9, fast_answer)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (fast.apis.fast_produce.taken, fast.apis.fast_produce.served) == (1, 0)
        assert fast.segment_bytes() == general.segment_bytes() == b""


def test_requests_of_other_shapes_are_never_learnt(zk: Any, tmp_path: Path) -> None:
    """A request of two partitions and an acks=0 request: the general path's answers, nothing learnt."""
    with two_brokers(zk, tmp_path) as (fast, general):
        two = [frame(keyless(5), i, partitions=2) for i in (1, 2)]  # partition 1 does not exist here
        for f in two:
            assert fast.serve(f) == general.serve(f)
        for i in (3, 4):
            assert fast.serve(frame(keyless(5), i, acks=0)) is None
            assert general.serve(frame(keyless(5), i, acks=0)) is None
        assert fast.apis.fast_produce.taken == 0
        assert fast.segment_bytes() == general.segment_bytes()
        assert fast.logs.get_log(TOPIC, 0).log_end_offset == 20  # type: ignore[union-attr]


def test_a_producer_spreading_over_partitions_has_its_first_request_learnt(zk: Any, tmp_path: Path) -> None:
    """One connection's requests to partitions 0, 1, 2, 0, 1, 2, ... (librdkafka's partitioner): the
    first is learnt for every partition of the topic, the others served fast, each at its partition's
    offsets."""
    with two_brokers(zk, tmp_path, partitions=3) as (fast, general):
        for i in range(9):
            f = frame(keyless(4 + i), i, partition=i % 3)
            fast_answer = fast.serve(f)
            assert fast_answer == general.serve(f)
            assert fast_answer is not None
            body = decode_response(PRODUCE_KEY, 9, fast_answer[4:]).body
            assert isinstance(body, ProduceResponse)
            [topic] = body.responses
            [partition] = topic.partition_responses
            expected_base = sum(4 + j for j in range(i % 3, i, 3))
            assert (partition.index, partition.error_code, partition.base_offset) == (i % 3, 0, expected_base)
        assert (fast.apis.fast_produce.taken, fast.apis.fast_produce.served) == (8, 8)
        for p in range(3):
            assert fast.segment_bytes(p) == general.segment_bytes(p)


def test_an_acks_all_append_waiting_for_a_follower_is_answered_as_the_general_path(
    zk: Any, tmp_path: Path
) -> None:
    """Broker 1 is in the ISR and never fetches: an acks=-1 request recognised by the fast path is
    appended, waits in the purgatory and is answered REQUEST_TIMED_OUT at its timeout, as the general
    path answers it (the same bytes), its records in the log."""
    with two_brokers(zk, tmp_path, replicas=(0, 1)) as (fast, general):
        for i in (1, 2):
            f = frame(keyless(3), i, acks=-1, timeout_ms=300)
            fast_answer = fast.serve(f)
            assert fast_answer == general.serve(f)
            assert error_of(9, fast_answer) == (ErrorCode.REQUEST_TIMED_OUT, -1)
        # the second appended by the fast path, answered by the general path's code
        assert (fast.apis.fast_produce.taken, fast.apis.fast_produce.served) == (1, 0)
        assert fast.segment_bytes() == general.segment_bytes()
        assert fast.logs.get_log(TOPIC, 0).log_end_offset == 6  # type: ignore[union-attr]


def test_empty_and_truncated_records_answer_as_the_general_path(zk: Any, tmp_path: Path) -> None:
    """A learnt request whose records are empty, or a batch cut short, recognised by the fast path: the
    general path's answer, byte for byte, and nothing appended; the next good request at offset 10."""
    good = keyless(10)
    frames = [frame(good, 1), frame(b"", 2), frame(good[:40], 3), frame(good[:-1], 4), frame(good, 5)]
    with two_brokers(zk, tmp_path) as (fast, general):
        answers = [(fast.serve(f), general.serve(f)) for f in frames]
        for i, (fast_answer, general_answer) in enumerate(answers):
            assert fast_answer == general_answer, (i, fast_answer, general_answer)
        assert [error_of(9, a)[0] for a, _ in answers[1:4]] == [error_of(9, b)[0] for _, b in answers[1:4]]
        assert all(error_of(9, a)[0] != 0 for a, _ in answers[1:4])
        assert error_of(9, answers[4][0]) == (0, 10)
        assert fast.apis.fast_produce.taken == 4
        assert fast.segment_bytes() == general.segment_bytes()


def test_pipelined_requests_are_appended_in_one_write_as_one_by_one(zk: Any, tmp_path: Path) -> None:
    """A read's pipelined requests given together to the fast broker, one at a time to the general one:
    the same answers and segment bytes, for a group with a corrupt request, an idempotent producer's gap,
    a batch appended in the group then retried in it, requests to another partition in the middle (a
    group of their own), and acks=-1 requests (another learnt request, which ends the groups before it);
    each partition's learnt requests went in one write."""
    corrupt = bytearray(keyless(10))
    corrupt[-1] ^= 0xFF
    frames = [
        frame(keyless(50), 1),  # learnt: the general path
        frame(keyless(50, BASE_TS + 5), 2),
        frame(keyless(7), 3),
        frame(bytes(corrupt), 4),  # refused in the middle of the group, alone
        frame(keyless(3), 5),
        frame(idempotent(0, 2), 6),
        frame(idempotent(5, 2), 7),  # a gap: 2 expected
        frame(idempotent(2, 1), 8),
        frame(idempotent(0, 2), 9),  # a retry of the batch appended by 6: its offsets
        frame(keyless(4), 10, partition=1),  # another partition: recognised, a group of its own
        frame(keyless(5), 11, partition=1),
        frame(keyless(6), 12),
        frame(keyless(2), 13, acks=-1),  # acks=-1: learnt, then a group of its own
        frame(keyless(2), 14, acks=-1),
        frame(keyless(3), 15, acks=-1),
        frame(keyless(1), 16),
    ]
    with two_brokers(zk, tmp_path, partitions=2) as (fast, general):
        fast_answers = fast.serve_pipelined(frames)
        general_answers = [general.serve(f) for f in frames]
        for i, (fast_answer, general_answer) in enumerate(zip(fast_answers, general_answers, strict=True)):
            assert fast_answer == general_answer, (i, fast_answer, general_answer)
        assert [error_of(9, a) for a in fast_answers] == [
            (0, 0),
            (0, 50),
            (0, 100),
            (ErrorCode.CORRUPT_MESSAGE, -1),
            (0, 107),
            (0, 110),
            (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
            (0, 112),
            (0, 110),
            (0, 0),
            (0, 4),
            (0, 113),
            (0, 119),
            (0, 121),
            (0, 123),
            (0, 126),
        ]
        path = fast.apis.fast_produce
        # 2-9 and 12 in one write, 10-11 in one, 14-15 in one, 16 alone; 1 and 13 learnt by the general path
        assert (path.taken, path.grouped, path.group_writes) == (14, 13, 3)
        assert (general.apis.fast_produce.taken, general.apis.fast_produce.grouped) == (0, 0)
        for p in range(2):
            assert fast.segment_bytes(p) == general.segment_bytes(p)
        assert [fast.logs.get_log(TOPIC, p).log_end_offset for p in range(2)] == [127, 9]  # type: ignore[union-attr]


def test_a_read_spread_over_many_partitions_is_appended_one_write_per_partition(
    zk: Any, tmp_path: Path
) -> None:
    """A read of librdkafka's requests to 40 partitions, twice over in alternating order (more partitions
    than a connection keeps learnt requests): one request learnt, every partition's requests appended in one
    write, each answered and stored as one by one, answers in request order."""
    partitions = 40
    order = [*range(partitions), *reversed(range(partitions))]
    frames = [frame(keyless(1 + i % 5), i + 1, partition=p) for i, p in enumerate(order)]
    with two_brokers(zk, tmp_path, partitions=partitions) as (fast, general):
        fast_answers = [fast.serve(frames[0]), *fast.serve_pipelined(frames[1:])]
        general_answers = [general.serve(f) for f in frames]
        assert fast_answers == general_answers
        expected: dict[int, int] = {}
        for i, p in enumerate(order):
            assert error_of(9, fast_answers[i]) == (0, expected.get(p, 0)), (i, p)
            expected[p] = expected.get(p, 0) + 1 + i % 5
        path = fast.apis.fast_produce
        # the first learnt by the general path; partition 0's second request alone in its group (its first
        # was before the read), the 39 others two to a write
        assert (path.taken, path.served, path.grouped, path.group_writes) == (79, 79, 78, 39)
        for p in range(partitions):
            assert fast.segment_bytes(p) == general.segment_bytes(p), p


def test_a_failure_in_a_group_answers_every_request_it_leaves_by_closing(
    zk: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests to partitions 0, 1, 0, the fast path's own code failing while answering the second to
    partition 0 (a defect injected into Lumber's code, not a client's bytes): the first is answered, the
    failed one closes the connection, and the request to partition 1 before it, whose group is never
    appended, is answered by closing too (unanswered, it would keep the connection muted for good)."""
    path_error = RuntimeError("injected")
    with two_brokers(zk, tmp_path, partitions=2) as (fast, _general):
        path = fast.apis.fast_produce
        assert fast.serve(frame(keyless(2), 1)) is not None  # learnt
        reply = path._reply

        def failing_reply(request: NetworkRequest, *args: Any) -> None:
            if struct.unpack_from(">i", request.frame, 4)[0] == 4:
                raise path_error
            reply(request, *args)

        monkeypatch.setattr(path, "_reply", failing_reply)
        frames = [frame(keyless(3), 2), frame(keyless(4), 3, partition=1), frame(keyless(5), 4)]
        answers = fast.serve_pipelined(frames)
        assert error_of(9, answers[0]) == (0, 2)
        assert answers[1:] == [None, None]
        closing = {
            struct.unpack_from(">i", r.request.frame, 4)[0]: r.reason
            for r in fast.sink.responses
            if r.close_after
        }
        assert closing == {
            3: "an earlier request of the connection failed",
            4: f"handling failed: {path_error!r}",
        }
        # partition 0's group was appended (its second request unanswered, as an answer lost); partition 1's
        # never was
        assert [fast.logs.get_log(TOPIC, p).log_end_offset for p in range(2)] == [10, 0]  # type: ignore[union-attr]
