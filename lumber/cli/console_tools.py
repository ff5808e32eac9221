"""What the console tools do: ``lumber produce`` (lines in, records out) and ``lumber consume`` (the reverse).

``produce`` reads lines (bytes, the line ending removed) and sends each as one record; with a key separator
a line ``key<SEP>value`` gives that key and value, and a line without the separator a null key. With
``encode_value`` the value sent is what that function makes of the line's value; a line it refuses
(``ValueError``) is not sent and counts as failed, as :class:`LineError` naming the line. It waits until
every record is acknowledged and counts the failures (each reported to ``on_error``).

``consume`` writes one line per record, as the caller's ``line`` function renders it. It stops after
``max_messages`` records or once ``timeout_ms`` passed without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.producer.producer import Producer


@dataclass(frozen=True)
class ProduceSummary:
    """How a ``produce`` run went: records sent, and how many lines failed (refused or not delivered)."""

    sent: int
    failed: int


class LineError(ValueError):
    """An input line that ``encode_value`` refused: not sent."""

    def __init__(self, number: int, reason: str) -> None:
        self.number = number
        super().__init__(f"line {number}: {reason}")


def produce_lines(
    producer: Producer,
    topic: str,
    lines: Iterable[bytes],
    *,
    key_separator: bytes | None = None,
    partition: int | None = None,
    encode_value: Callable[[bytes], bytes] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
) -> ProduceSummary:
    """Send each line as a record, then flush; returns the counts (failures also go to ``on_error``)."""
    failures: list[BaseException] = []

    def report(_: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)
            if on_error is not None:
                on_error(error)

    sent = 0
    for number, raw in enumerate(lines, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        key: bytes | None = None
        value = line
        if key_separator is not None:
            found = line.find(key_separator)
            if found >= 0:
                key, value = line[:found], line[found + len(key_separator) :]
        if encode_value is not None:
            try:
                value = encode_value(value)
            except ValueError as exc:
                refused = LineError(number, str(exc))
                failures.append(refused)
                if on_error is not None:
                    on_error(refused)
                continue
        producer.send(topic, value, key, partition=partition, on_delivery=report)
        sent += 1
    producer.flush()
    return ProduceSummary(sent, len(failures))


class MessageSource(Protocol):
    """What :func:`consume_to` reads: a consumer, a group member or one of its streams."""

    def messages(self, timeout_ms: int | None = None) -> Iterator[ConsumerRecord]: ...


def consume_to(
    consumer: MessageSource,
    out: BinaryIO,
    *,
    line: Callable[[ConsumerRecord], bytes],
    max_messages: int | None,
    timeout_ms: int | None,
) -> int:
    """Write ``line(record)`` of each record to ``out`` (see the module docstring); returns how many were
    written."""
    written = 0
    if max_messages is not None and max_messages <= 0:
        return 0
    for record in consumer.messages(timeout_ms):
        out.write(line(record))
        written += 1
        if max_messages is not None and written >= max_messages:
            break
    out.flush()
    return written
