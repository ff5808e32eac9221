"""What the console tools do: ``lumber produce`` (lines in, records out) and ``lumber consume`` (the reverse).

``produce`` reads lines (bytes, the line ending removed) and sends each as one record; with a key separator
a line ``key<SEP>value`` gives that key and value, and a line without the separator a null key. It waits
until every record is acknowledged and counts the failures (each reported to ``on_error``).

``consume`` writes one line per record: the value, preceded by ``key<SEP>`` with ``print_key`` (a null key
prints as nothing) and by ``partition<SEP>offset<SEP>`` with ``print_offset``. Null values print as
nothing. It stops after ``max_messages`` records or once ``timeout_ms`` passed without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO

from broker.client.consumer import Consumer
from broker.client.producer import Producer


@dataclass(frozen=True)
class ProduceSummary:
    """How a ``produce`` run went: lines sent, and how many of them failed to be delivered."""

    sent: int
    failed: int


def produce_lines(
    producer: Producer,
    topic: str,
    lines: Iterable[bytes],
    *,
    key_separator: bytes | None = None,
    partition: int | None = None,
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
    for raw in lines:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        key: bytes | None = None
        value = line
        if key_separator is not None:
            found = line.find(key_separator)
            if found >= 0:
                key, value = line[:found], line[found + len(key_separator) :]
        producer.send(topic, value, key, partition=partition, on_delivery=report)
        sent += 1
    producer.flush()
    return ProduceSummary(sent, len(failures))


def consume_to(
    consumer: Consumer,
    out: BinaryIO,
    *,
    max_messages: int | None,
    timeout_ms: int | None,
    print_key: bool = False,
    print_offset: bool = False,
    separator: bytes = b"\t",
) -> int:
    """Write records to ``out`` as lines (see the module docstring); returns how many were written."""
    written = 0
    if max_messages is not None and max_messages <= 0:
        return 0
    for record in consumer.messages(timeout_ms):
        parts: list[bytes] = []
        if print_offset:
            parts.append(b"%d%b%d%b" % (record.partition, separator, record.offset, separator))
        if print_key:
            parts.append((record.key or b"") + separator)
        parts.append(record.value or b"")
        parts.append(b"\n")
        out.write(b"".join(parts))
        written += 1
        if max_messages is not None and written >= max_messages:
            break
    out.flush()
    return written
