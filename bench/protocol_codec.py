"""Wire-protocol codec benchmark: Lumber's compiled codecs against kafka-python 3.x's, in the same run.

Run from the repository root::

    .venv/bin/python bench/protocol_codec.py [--rounds 7] [--seconds 0.2]

The hot path of a Kafka broker is decoding Produce requests and encoding Fetch responses. Measured here,
each as the whole frame a server sees or sends (header included, size prefix excluded on decode):

1. **Produce request decode**, v7 (the last non-flexible version) and v9 (flexible, what kafka-python and
   librdkafka 2.x send): 1 topic, 1 partition, 1 KiB of records. Lumber: ``decode_request`` (the records
   stay a zero-copy view of the frame); kafka-python: ``ProduceRequest.decode(frame, header=True)``.
2. **Fetch response encode**, v11 and v12, 1 topic, 1 partition, 1 KiB of records. Lumber:
   ``encode_fetch_response`` with the records as a region (what the server sends before ``sendfile``;
   the records are never copied) and ``encode_response`` with the records in memory (the like-for-like
   case); kafka-python: ``FetchResponse.encode(header=True, framed=True)`` with the records in memory.
3. **Produce response encode**, v9, the answer to (1).

Each case runs ``--rounds`` rounds of about ``--seconds`` each, alternating Lumber and kafka-python so that
both see the same machine load; the fastest round counts. It prints microseconds per operation and the
ratio kafka-python / Lumber (above 1: Lumber is faster), and exits 1 if Lumber is slower in any case.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.protocol import (
    compile_all,
    decode_request,
    encode_fetch_response,
    encode_request,
    encode_response,
)
from broker.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from broker.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)

with warnings.catch_warnings():
    # kafka-python's protocol package calls importlib.resources.read_text, deprecated in 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer import FetchResponse as KafkaFetchResponse
    from kafka.protocol.producer import ProduceRequest as KafkaProduceRequest
    from kafka.protocol.producer import ProduceResponse as KafkaProduceResponse

RECORDS = bytes((i * 131 + 7) % 256 for i in range(1024))
TOPIC = "page-views"


@dataclass(frozen=True)
class SegmentRegion:
    """What the server passes for records it will sendfile: only the size matters to the encoder."""

    size_bytes: int


def best_seconds_per_op(operation: Callable[[], object], seconds: float) -> Callable[[], float]:
    """A function running one timed round of ``operation`` and returning its seconds per call."""
    calls = 1
    while True:  # calibrate: calls per round so that a round lasts about ``seconds``
        start = time.perf_counter()
        for _ in range(calls):
            operation()
        if time.perf_counter() - start >= seconds / 10:
            break
        calls *= 2
    calls = max(1, int(calls * 10 * seconds / max(time.perf_counter() - start, 1e-9) / 10))

    def one_round() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            operation()
        return (time.perf_counter() - start) / calls

    return one_round


def compare(
    name: str, ours: Callable[[], object], theirs: Callable[[], object], args: argparse.Namespace
) -> float:
    ours_round = best_seconds_per_op(ours, args.seconds)
    theirs_round = best_seconds_per_op(theirs, args.seconds)
    ours_best = theirs_best = float("inf")
    for _ in range(args.rounds):
        ours_best = min(ours_best, ours_round())
        theirs_best = min(theirs_best, theirs_round())
    ratio = theirs_best / ours_best
    print(
        f"{name:52s} lumber {ours_best * 1e6:8.2f} us   kafka-python {theirs_best * 1e6:8.2f} us   "
        f"ratio {ratio:5.2f}x"
    )
    return ratio


def produce_request() -> ProduceRequest:
    partition = PartitionProduceData(index=0, records=RECORDS)
    return ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[TopicProduceData(TOPIC, [partition])])


def fetch_response(records: object) -> FetchResponse:
    partition = PartitionData(
        partition_index=0,
        error_code=0,
        high_watermark=1_000_000,
        last_stable_offset=1_000_000,
        log_start_offset=0,
        aborted_transactions=None,
        records=records,  # type: ignore[arg-type]
    )
    return FetchResponse(responses=[FetchableTopicResponse(TOPIC, [partition])])


def kafka_fetch_response(version: int) -> KafkaFetchResponse:
    topic = KafkaFetchResponse.FetchableTopicResponse
    partition = topic.PartitionData(
        partition_index=0,
        error_code=0,
        high_watermark=1_000_000,
        last_stable_offset=1_000_000,
        log_start_offset=0,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=RECORDS,
    )
    response = KafkaFetchResponse(
        version=version,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[topic(topic=TOPIC, partitions=[partition])],
    )
    response.with_header(correlation_id=7)
    return response


def kafka_produce_response(version: int) -> KafkaProduceResponse:
    topic = KafkaProduceResponse.TopicProduceResponse
    partition = topic.PartitionProduceResponse(
        index=0, error_code=0, base_offset=123456, log_append_time_ms=-1, log_start_offset=0
    )
    response = KafkaProduceResponse(
        version=version, responses=[topic(name=TOPIC, partition_responses=[partition])], throttle_time_ms=0
    )
    response.with_header(correlation_id=7)
    return response


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per case; the fastest counts")
    parser.add_argument("--seconds", type=float, default=0.2, help="approximate length of one round")
    args = parser.parse_args()
    compile_all()
    ratios: list[float] = []
    print(f"records per partition: {len(RECORDS)} bytes; best of {args.rounds} rounds of ~{args.seconds}s\n")

    for version in (7, 9):
        frame = encode_request(version, 42, "producer-1", produce_request())[4:]
        ours_request = decode_request(frame)
        theirs_request = KafkaProduceRequest.decode(frame, version=version, header=True)
        assert bytes(ours_request.body.topic_data[0].partition_data[0].records) == RECORDS  # type: ignore[union-attr]
        assert theirs_request.topic_data[0].partition_data[0].records == RECORDS
        ratios.append(
            compare(
                f"Produce v{version} request decode ({len(frame)} B frame)",
                lambda frame=frame: decode_request(frame),
                lambda frame=frame, version=version: KafkaProduceRequest.decode(
                    frame, version=version, header=True
                ),
                args,
            )
        )

    for version in (11, 12):
        theirs = kafka_fetch_response(version)
        in_memory = fetch_response(RECORDS)
        with_region = fetch_response(SegmentRegion(len(RECORDS)))
        expected = bytes(theirs.encode(header=True, framed=True))
        assert encode_response(version, 7, in_memory) == expected
        chunks = encode_fetch_response(version, 7, with_region)
        assert chunks[0] + RECORDS + b"".join(chunks[2:]) == expected  # type: ignore[operator]
        ratios.append(
            compare(
                f"Fetch v{version} response encode, records as region",
                lambda version=version, with_region=with_region: encode_fetch_response(
                    version, 7, with_region
                ),
                lambda theirs=theirs: theirs.encode(header=True, framed=True),
                args,
            )
        )
        ratios.append(
            compare(
                f"Fetch v{version} response encode, records in memory",
                lambda version=version, in_memory=in_memory: encode_response(version, 7, in_memory),
                lambda theirs=theirs: theirs.encode(header=True, framed=True),
                args,
            )
        )

    produce_response = ProduceResponse(
        responses=[
            TopicProduceResponse(
                TOPIC, [PartitionProduceResponse(index=0, base_offset=123456, log_start_offset=0)]
            )
        ]
    )
    theirs_response = kafka_produce_response(9)
    assert encode_response(9, 7, produce_response) == bytes(theirs_response.encode(header=True, framed=True))
    ratios.append(
        compare(
            "Produce v9 response encode",
            lambda: encode_response(9, 7, produce_response),
            lambda: theirs_response.encode(header=True, framed=True),
            args,
        )
    )

    slowest = min(ratios)
    print(f"\nslowest ratio {slowest:.2f}x (target: Lumber at least as fast as kafka-python, ratio >= 1)")
    return 0 if slowest >= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
