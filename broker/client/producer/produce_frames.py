"""The producer's ``acks=0`` Produce requests, framed from each partition's template.

With ``acks=0`` the sender writes one Produce request per batch, each to one partition (the broker appends a
run of them at once: :meth:`~broker.client.producer.sender.Sender._send_to`), and at batch size 1 one request
per record: building a :class:`~broker.protocol.messages.produce.ProduceRequest` of three NamedTuples and
encoding it, even through the codec's template (:func:`~broker.protocol.codec.encode_request`), cost the
sender thread about as much as the record's own batch. :class:`ProduceFrames` frames those requests straight
from the partition's :class:`~broker.protocol.codec.ProduceTemplate` (the request cut around its correlation
id and its records, made once per version, topic and partition by the codec), byte for byte what
:func:`~broker.protocol.codec.encode_request` writes for the same request:

``size (int32) | api key + version | correlation id (int32) | middle | records length | records | tail``

where the records' length is an int32 before the flexible versions (Produce v9) and a uvarint of length + 1
from them, and the tail the flexible versions' empty tagged fields of the partition, the topic and the body.

The templates are kept per producer (a few partitions); the correlation ids come from the connection that
writes the frames (:meth:`~broker.client.network.connection.BrokerConnection.send_unanswered_frames`). Used
by the sender thread only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from broker.client.producer.producer_batch import ProducerBatch
from broker.protocol.codec import produce_template
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.primitives import encode_uvarint

_INT32 = struct.Struct(">i").pack
_CORRELATION_MASK = 0x7FFFFFFF
#: (api key + version, middle, tail, flexible, the frame's bytes around the records and their length)
Template = tuple[bytes, bytes, bytes, bool, int]


class ProduceFrames:
    """Frames the ``acks=0`` Produce requests of one producer (its acks and request timeout)."""

    def __init__(self, acks: int, timeout_ms: int) -> None:
        self._acks = acks
        self._timeout_ms = timeout_ms
        self._templates: dict[tuple[int, str | None, str, int], Template] = {}

    def template(self, version: int, client_id: str | None, topic: str, partition: int) -> Template:
        """The cut of a Produce request to ``topic``-``partition`` at ``version`` from ``client_id``."""
        key = (version, client_id, topic, partition)
        found = self._templates.get(key)
        if found is None:
            topic_data = TopicProduceData(topic, (PartitionProduceData(partition, b""),))
            body = ProduceRequest(None, self._acks, self._timeout_ms, (topic_data,))
            cut = produce_template(version, client_id, body)
            # size prefix excluded: the head (4), the correlation id (4), the middle and the tail
            fixed = 8 + len(cut.middle) + len(cut.tail)
            found = self._templates[key] = (cut.head, cut.middle, cut.tail, cut.flexible, fixed)
        return found

    def frames(
        self, version: int, client_id: str | None, ids: Iterator[int], batches: Sequence[ProducerBatch]
    ) -> list[bytes]:
        """One whole frame (size prefix included) per batch, in order, each with the next of ``ids``
        (masked to 31 bits, as every request's); a batch's bytes are built by its first attempt."""
        templates = self._templates
        out = []
        for batch in batches:
            records = batch.start_attempt()
            template = templates.get((version, client_id, batch.topic, batch.partition))
            if template is None:
                template = self.template(version, client_id, batch.topic, batch.partition)
            head, middle, tail, flexible, fixed = template
            n = len(records)
            length = encode_uvarint(n + 1) if flexible else _INT32(n)
            out.append(
                b"".join(
                    (
                        _INT32(fixed + len(length) + n),
                        head,
                        _INT32(next(ids) & _CORRELATION_MASK),
                        middle,
                        length,
                        records,
                        tail,
                    )
                )
            )
        return out
