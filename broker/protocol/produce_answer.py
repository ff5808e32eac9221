"""The answer to a Produce request to one partition that succeeded, packed from a template (issue 39).

A producer such as librdkafka sends one partition per request, and the broker answers each with a
:class:`~broker.protocol.messages.produce.ProduceResponse` of one topic and one partition whose only
variable parts are the correlation id and, after the partition's index and its error code (0), the
partition's ``base_offset``, ``log_append_time_ms`` (v2+) and ``log_start_offset`` (v5+): all fixed-width,
so that every such answer at one version, to one topic and partition, has the same length and the same
bytes elsewhere (no record errors, no error message, ``throttle_time_ms`` 0, no tagged fields).

:func:`produce_answer` cuts the generic encoding (:func:`~broker.protocol.codec.encode_response`) of that
response around those fields once per ``(version, topic, partition)``, finding each field's bytes by
encoding the response again with that field changed (so nothing here knows the layout of Produce); the
answer of a request is then one :meth:`struct.Struct.pack` call. Byte-for-byte the generic encoding
(tests/broker/protocol/test_produce_answer.py compares every version). Anything else (an error, several
partitions) is encoded the generic way.

The frame, size prefix included::

    head (size prefix) | correlation id | between (header tags .. error code) | offsets | after

Thread-safe: the templates are immutable; the cache is a dict whose ``get`` and ``setitem`` are atomic
(two threads building the same template both build it, once each).
"""

from __future__ import annotations

import struct
from typing import Final

from broker.protocol.codec import encode_response
from broker.protocol.errors import EncodeError
from broker.protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse

__all__ = ["ProduceAnswer", "produce_answer"]

#: Produce v2 added ``log_append_time_ms``, v5 ``log_start_offset``: the offsets each version answers.
_FIRST_VERSION_WITH_APPEND_TIME: Final = 2
_FIRST_VERSION_WITH_LOG_START: Final = 5
_INT64_BYTES: Final = 8
_MAX_ANSWERS: Final = 1024


class ProduceAnswer:
    """A one-partition Produce response without error at one version, cut around its variable fields."""

    __slots__ = ("_after", "_between", "_fields", "_pack", "_prefix")

    def __init__(self, version: int, topic: str, partition: int) -> None:
        fields = 1
        if version >= _FIRST_VERSION_WITH_APPEND_TIME:
            fields += 1
        if version >= _FIRST_VERSION_WITH_LOG_START:
            fields += 1
        self._fields = fields

        def frame(base_offset: int, log_append_time_ms: int, log_start_offset: int) -> bytes:
            partition_response = PartitionProduceResponse(
                index=partition,
                error_code=0,
                base_offset=base_offset,
                log_append_time_ms=log_append_time_ms,
                log_start_offset=log_start_offset,
            )
            body = ProduceResponse(
                responses=[TopicProduceResponse(name=topic, partition_responses=[partition_response])]
            )
            return encode_response(version, 0, body)

        base = frame(0, 0, 0)
        # each field's bytes: where the encoding differs once that field alone changes
        starts = []
        for field in range(fields):
            changed = frame(*[-1 if i == field else 0 for i in range(3)])
            diff = [i for i, (a, b) in enumerate(zip(base, changed, strict=True)) if a != b]
            if len(diff) != _INT64_BYTES or diff[-1] - diff[0] != _INT64_BYTES - 1:  # pragma: no cover
                raise EncodeError(f"Produce v{version}: the response's offsets are not fixed-width fields")
            starts.append(diff[0])
        first = starts[0]
        if starts != [first + _INT64_BYTES * i for i in range(fields)]:  # pragma: no cover
            raise EncodeError(f"Produce v{version}: the response's offsets are not adjacent")
        end = first + _INT64_BYTES * fields
        self._prefix = base[:4]
        self._between = base[8:first]
        self._after = base[end:]
        self._pack = struct.Struct(f">4si{len(self._between)}s{'q' * fields}{len(self._after)}s").pack

    def encode(
        self, correlation_id: int, base_offset: int, log_append_time_ms: int, log_start_offset: int
    ) -> bytes:
        """The response frame (size prefix included), as :func:`encode_response` encodes it."""
        fields = self._fields
        if fields == 3:
            return self._pack(
                self._prefix,
                correlation_id,
                self._between,
                base_offset,
                log_append_time_ms,
                log_start_offset,
                self._after,
            )
        if fields == 2:
            return self._pack(
                self._prefix, correlation_id, self._between, base_offset, log_append_time_ms, self._after
            )
        return self._pack(self._prefix, correlation_id, self._between, base_offset, self._after)


_ANSWERS: dict[tuple[int, str, int], ProduceAnswer] = {}


def produce_answer(version: int, topic: str, partition: int) -> ProduceAnswer:
    """The (cached) :class:`ProduceAnswer` of ``topic``'s ``partition`` at ``version``."""
    key = (version, topic, partition)
    answer = _ANSWERS.get(key)
    if answer is None:
        answer = ProduceAnswer(version, topic, partition)
        if len(_ANSWERS) >= _MAX_ANSWERS:
            _ANSWERS.clear()
        _ANSWERS[key] = answer
    return answer
