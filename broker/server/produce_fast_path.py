"""The fast path of the common Produce request: one topic, one partition, answered (issue 39).

A producer such as librdkafka sends each connection's Produce requests to one partition, one after the
other, byte-for-byte the same but for the correlation id and the records. :meth:`KafkaApis.handle
<broker.server.kafka_apis.KafkaApis.handle>` offers each request to :meth:`ProduceFastPath.serve` before
decoding it; the fast path serves it when it is such a request of a connection it has *learnt*, and
otherwise says so and the general path (decode, ``ReplicaManager.append_records``, the response's message
objects, the generic encoder) serves it as before. What it skips is only the general path's Python around
the append, never a step of the append:

1. **Recognise** (instead of decoding): the general path learns a connection's request
   (:meth:`ProduceFastPath.learn`, from ``KafkaApis._produce``: Produce v3+, ``acks`` 1 or -1, one topic
   with one partition and its records) as a :class:`~broker.protocol.codec.ProduceTemplate`, which
   recognises the same request with any correlation id and records
   (:meth:`~broker.protocol.codec.ProduceTemplate.records_of`), so the version, client id, transactional
   id, ``acks``, ``timeout_ms``, topic and partition are the learnt request's.
2. **Authorise** WRITE on the topic, per request (:class:`~broker.server.auth_helper.AuthHelper`, the same
   check as the general path's): refused, the fast path declines and the general path answers the refusal
   (nothing has been done). **Find the partition** led here
   (:meth:`~broker.server.replica_manager.ReplicaManager.leader_partition`, whose errors are answered as
   an append's, below).
3. **Append** through :meth:`~broker.server.replica_manager.ReplicaManager.append_to_local_log`, the one
   path into the log (validation, the idempotent producer's checks, offsets, leader epoch), inside
   :meth:`~broker.server.replica_manager.ReplicaManager.completing_here` as the general path.
4. **Answer**: a success that needs no wait (``acks=1``; ``acks=-1`` whose partition already acknowledges
   the append: :meth:`~broker.server.partition.Partition.check_enough_replicas`) is packed from its
   :class:`~broker.protocol.produce_answer.ProduceAnswer` template, byte-for-byte what the general path
   encodes. Anything else, an append that failed, an ``acks=-1`` append that must wait (followers, or
   ``flush_on_ack``), decodes the request then and goes on as the general path from there, with the same
   result: the error answered by the same response builder (``answer``), the wait by
   :meth:`~broker.server.replica_manager.ReplicaManager.answer_when_acknowledged`.

So a request served here gets the same append, the same answer bytes and the same side effects as on the
general path (tests/broker/server/test_produce_fast_path.py compares both, byte for byte, for each case).

Concurrency: one connection's requests are served one at a time, in order (by its processor, or a handler
thread). The learnt requests are a dict keyed by connection id, whose ``get`` and ``setitem`` are atomic;
it is cleared when it holds :data:`MAX_LEARNT` connections (a closed connection's entry stays until then).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable
from typing import NamedTuple

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.log.errors import LogError
from broker.log.log import Buffer
from broker.network.request_channel import NetworkRequest, NetworkResponse, RequestChannel
from broker.protocol import ProtocolError, RequestHeader, decode_request
from broker.protocol.codec import ProduceTemplate, produce_acks, produce_template
from broker.protocol.messages.produce import ProduceRequest
from broker.protocol.produce_answer import ProduceAnswer, produce_answer
from broker.record.errors import RecordError
from broker.record.topic_partition import TopicPartition
from broker.security.acl_binding import AclOperation, ResourceType
from broker.server.auth_helper import AuthHelper
from broker.server.delayed_produce import ProduceResult
from broker.server.error_codes import ANSWERED_ERRORS
from broker.server.errors import ServerError
from broker.server.partition import Partition
from broker.server.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

#: The most connections whose requests are kept learnt at once.
MAX_LEARNT = 4096
#: The most requests kept learnt per connection (a producer spreading over partitions sends one per
#: partition); the oldest is forgotten first.
MAX_LEARNT_PER_CONNECTION = 16
#: Produce v0-v2 carry the old message sets, which the general path refuses.
_FIRST_RECORD_BATCH_PRODUCE_VERSION = 3
_CORRELATION_ID = struct.Struct(">i")
#: What the general path's append catches (``ReplicaManager.append_records``): a partition's answer.
_APPEND_ERRORS = (LogError, RecordError, ServerError)

#: The general path's answer to a Produce (``KafkaApis._produce_answer``): the request, its decoded
#: header and body, and every partition's result.
GeneralAnswer = Callable[
    [NetworkRequest, RequestHeader, ProduceRequest, dict[TopicPartition, ProduceResult]], None
]


def _one_partition(header: RequestHeader, body: ProduceRequest) -> bool:
    """Whether ``body`` is the shape this path serves: record batches (v3+) to one topic's one partition."""
    topics = body.topic_data
    return (
        header.api_version >= _FIRST_RECORD_BATCH_PRODUCE_VERSION
        and len(topics) == 1
        and len(topics[0].partition_data) == 1
    )


class _Learnt(NamedTuple):
    """A connection's request as the fast path serves it."""

    template: ProduceTemplate
    tp: TopicPartition
    acks: int
    answer: ProduceAnswer


class ProduceFastPath:
    """Serves the learnt one-partition Produce requests of each connection (see the module docstring)."""

    def __init__(
        self,
        *,
        replicas: ReplicaManager,
        cluster: ClusterWatcher,
        auth: AuthHelper,
        channel: RequestChannel,
        answer: GeneralAnswer,
        enabled: bool = True,
    ) -> None:
        self._replicas = replicas
        self._cluster = cluster
        self._auth = auth
        self._channel = channel
        self._answer = answer
        #: False: nothing is learnt, every request takes the general path (tests compare the two).
        self.enabled = enabled
        self._learnt: dict[str, list[_Learnt]] = {}
        #: Requests this path took (tests and diagnosis), and those of them it answered itself from the
        #: packed template (the others: a failure or a wait, answered by the general path's code).
        self.taken = 0
        self.served = 0

    def learn(self, request: NetworkRequest, header: RequestHeader, body: ProduceRequest) -> None:
        """Remember ``request`` (being served by the general path) for its connection's next requests, if
        it has the shape the fast path serves (see the module docstring)."""
        topics = body.topic_data
        if not self.enabled or body.acks not in (1, -1) or not _one_partition(header, body):
            return
        topic, partition = topics[0].name, topics[0].partition_data[0].index
        template = produce_template(header.api_version, header.client_id, body)
        connection_id = request.connection_id
        known = self._learnt.get(connection_id)
        if known is None:
            if len(self._learnt) >= MAX_LEARNT:
                self._learnt.clear()
            known = self._learnt[connection_id] = []
        elif any(learnt.template == template for learnt in known):
            return
        elif len(known) >= MAX_LEARNT_PER_CONNECTION:
            del known[0]
        known.append(
            _Learnt(
                template,
                TopicPartition(topic, partition),
                body.acks,
                produce_answer(header.api_version, topic, partition),
            )
        )

    def serve_run(self, requests: Iterable[NetworkRequest]) -> int:
        """Serve the leading ``acks=0`` Produce requests of ``requests`` (consecutive requests of one
        connection) together; returns how many were served. They get no response, as on the general path.
        ``requests`` is taken one at a time, and nothing after the first request that ends the run.

        Served together means one append per run of requests to the same partition
        (``ReplicaManager.append_run``), with the same outcome as appending them one by one. A request
        that is not a single-partition ``acks=0`` Produce to a partition led here, or whose append fails,
        ends the run: it and the requests after it are left to ``KafkaApis.handle`` (which answers or
        closes as usual), nothing of them appended.
        """
        view = self._cluster.view
        runs: list[tuple[Partition, list[Buffer]]] = []
        template: ProduceTemplate | None = None  # the last request decoded: the next are likely the same
        partition: Partition | None = None
        for request in requests:
            frame = request.frame
            records: Buffer | None = None if template is None else template.records_of(frame)
            if records is None:
                acks = produce_acks(frame)
                if acks is not None and acks != 0:
                    break  # answered: KafkaApis.handle takes it (read from its header, not decoded twice)
                try:
                    header, body = decode_request(frame)
                except ProtocolError:
                    break
                if type(body) is not ProduceRequest or body.acks != 0 or not _one_partition(header, body):
                    break
                topic_data = body.topic_data[0]
                partition_data = topic_data.partition_data[0]
                decoded_records = partition_data.records
                if not isinstance(decoded_records, (bytes, bytearray, memoryview)):
                    break
                records = decoded_records
                if not self._auth.authorize(
                    request.session, AclOperation.WRITE, ResourceType.TOPIC, topic_data.name
                ):
                    break  # KafkaApis.handle refuses it
                try:
                    partition = self._replicas.leader_partition(
                        view, TopicPartition(topic_data.name, partition_data.index)
                    )
                except ANSWERED_ERRORS:
                    break
                template = produce_template(header.api_version, header.client_id, body)
            # else: the same request as the template's (acks=0, same partition), other records
            if partition is None:  # unreachable: a template is only kept with its partition
                break
            if runs and runs[-1][0] is partition:
                runs[-1][1].append(records)
            else:
                runs.append((partition, [records]))
        if not runs:  # the first request ended the run (an acks=1 Produce pipelined behind another)
            return 0
        with self._replicas.completing_here():  # the followers' waiting fetches are answered here
            return self._replicas.append_run(runs)

    def serve(self, request: NetworkRequest) -> bool:
        """Serve ``request`` if it is one of its connection's learnt requests with other records; False
        (nothing done) if the general path must serve it."""
        known = self._learnt.get(request.connection_id)
        if known is None:
            return False
        frame = request.frame
        for learnt in known:
            records = learnt.template.records_of(frame)
            if records is not None:
                break
        else:
            return False
        tp = learnt.tp
        auth = self._auth
        if auth.enabled and not auth.authorize(
            request.session, AclOperation.WRITE, ResourceType.TOPIC, tp.topic
        ):
            return False  # the general path refuses it, naming why
        self.taken += 1
        replicas = self._replicas
        acks = learnt.acks
        with replicas.completing_here():  # the followers' waiting fetches are answered here
            partition: Partition | None = None
            try:
                partition = replicas.leader_partition(self._cluster.view, tp)
                info = replicas.append_to_local_log(partition, records, acks)
            except _APPEND_ERRORS as exc:
                self._general(request, {tp: ProduceResult(exc, None, partition)}, acks)
                return True
            if acks == -1 and (
                partition.flush_on_ack
                or partition.check_enough_replicas(info.last_offset + 1) != (True, None)
            ):
                self._general(request, {tp: ProduceResult(None, info, partition)}, acks)
                return True
            self.served += 1
            (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 4)
            answer = learnt.answer.encode(
                correlation_id, info.first_offset, info.log_append_time_ms, partition.log_start_offset
            )
            self._channel.send_response(NetworkResponse(request, (answer,)))
        return True

    def _general(
        self, request: NetworkRequest, results: dict[TopicPartition, ProduceResult], acks: int
    ) -> None:
        """Go on as the general path from the append's ``results``: answer now, or for ``acks=-1`` once
        acknowledged (``ReplicaManager.append_records``'s end)."""
        header, body = decode_request(request.frame)
        if type(body) is not ProduceRequest:  # pragma: no cover - recognised by a Produce template
            raise TypeError(f"{type(body).__name__} recognised as a Produce request")

        def respond(answered: dict[TopicPartition, ProduceResult]) -> None:
            self._answer(request, header, body, answered)

        if acks == -1:
            self._replicas.answer_when_acknowledged(results, body.timeout_ms, respond)
        else:
            respond(results)
