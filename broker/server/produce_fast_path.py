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
   recognises the same request to any partition of the topic with any correlation id and records
   (:meth:`~broker.protocol.codec.ProduceTemplate.partition_records_of`), so the version, client id,
   transactional id, ``acks``, ``timeout_ms`` and topic are the learnt request's. One learnt request serves
   a producer spreading its records over all the topic's partitions (a request per partition, in any
   order), however many they are.
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

**A read's requests together** (:meth:`ProduceFastPath.serve_pipelined`, issue 39): the network processor
gives the whole Produce requests buffered behind the first of a read (``KafkaApis.handle_pipelined``).
Each is recognised and authorised alone (steps 1 and 2) and gathered with the others of its partition and
``acks``; a request of another shape, or the end of the requests, appends what was gathered, one
partition's requests in one pass (:meth:`~broker.server.replica_manager.ReplicaManager.append_many`,
:meth:`broker.log.log.Log.append_many`: each validated and checked against the idempotent producers'
state alone, with the outcome of appending them one by one, but one ``writev`` and one publication of the
new log end), the partitions in the order of their first request, each request answered (step 4) after
its partition's write. Then the request of another shape is served by ``KafkaApis.handle``, so it comes
after the requests before it; the processor stops giving requests once an answer closes the connection.

So one partition's requests are appended in their order, as Kafka appends them, but a read's requests to
different partitions are not: ``p0 p1 p0`` appends both of partition 0's, then partition 1's. Nothing a
client sees depends on that order: the answers still leave in request order (the processor queues each
with its request), each partition's offsets are those of appending one by one, and no answer is sent
before its append. Kafka appends each request on its own, in order (docs/storage.md). One difference
remains if the broker fails unexpectedly while appending (a defect, never a client's bytes: those are
answered): the connection closes at the first request left unanswered, and a later request of a
partition appended before it may be in the log, unanswered, as a request whose answer was lost.

Concurrency: one connection's requests are served one at a time, in order (by its processor, or a handler
thread). The learnt requests are a dict keyed by connection id, whose ``get`` and ``setitem`` are atomic;
it is cleared when it holds :data:`MAX_LEARNT` connections (a closed connection's entry stays until then).
The partitions' answers (:class:`_Target`) are a dict shared by all connections, keyed by what makes them,
so two threads making the same entry at once make equal ones; it is cleared at :data:`MAX_TARGETS`.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.log.append_info import AppendInfo
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
#: The most requests kept learnt per connection (one per topic, ``acks``, transactional id, ...); the
#: oldest is forgotten first.
MAX_LEARNT_PER_CONNECTION = 16
#: The most partitions' answers kept (:class:`_Target`, shared by the connections).
MAX_TARGETS = 16_384
#: Produce v0-v2 carry the old message sets, which the general path refuses.
_FIRST_RECORD_BATCH_PRODUCE_VERSION = 3
_CORRELATION_ID = struct.Struct(">i")
#: What the general path's append catches (``ReplicaManager.append_records``): a partition's answer.
_APPEND_ERRORS = (LogError, RecordError, ServerError)

#: What a recognised request's append gave: its offsets, or why nothing was appended.
_Outcome = AppendInfo | LogError | RecordError | ServerError

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
    """A connection's request as the fast path recognises it, to any partition of its topic."""

    template: ProduceTemplate
    version: int
    topic: str
    acks: int


class _Target(NamedTuple):
    """A recognised request's partition: where it is appended and how its success is answered."""

    tp: TopicPartition
    acks: int
    answer: ProduceAnswer
    #: ``(tp, acks)``: the requests one write may append together.
    key: tuple[TopicPartition, int]


#: A recognised request: the request, its partition and its records.
_Recognised = tuple[NetworkRequest, _Target, Buffer]


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
        self._targets: dict[tuple[int, str, int, int], _Target] = {}
        #: Requests this path took (tests and diagnosis), and those of them it answered itself from the
        #: packed template (the others: a failure or a wait, answered by the general path's code).
        self.taken = 0
        self.served = 0
        #: Requests taken that were appended with others in one write, and the writes that did it.
        self.grouped = 0
        self.group_writes = 0

    def learn(self, request: NetworkRequest, header: RequestHeader, body: ProduceRequest) -> None:
        """Remember ``request`` (being served by the general path) for its connection's next requests, if
        it has the shape the fast path serves (see the module docstring)."""
        topics = body.topic_data
        if not self.enabled or body.acks not in (1, -1) or not _one_partition(header, body):
            return
        template = produce_template(header.api_version, header.client_id, body)
        connection_id = request.connection_id
        known = self._learnt.get(connection_id)
        if known is None:
            if len(self._learnt) >= MAX_LEARNT:
                self._learnt.clear()
            known = self._learnt[connection_id] = []
        elif any(learnt.template.same_but_partition(template) for learnt in known):
            return
        elif len(known) >= MAX_LEARNT_PER_CONNECTION:
            del known[0]
        known.append(_Learnt(template, header.api_version, topics[0].name, body.acks))

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
        recognised = self._recognise(request)
        if recognised is None:
            return False
        self._append_one(request, *recognised)
        return True

    def serve_pipelined(
        self, requests: Iterable[NetworkRequest], handle: Callable[[NetworkRequest], None]
    ) -> None:
        """Serve a connection's pipelined ``requests``, each as ``handle`` (``KafkaApis.handle``) would, but
        the learnt requests to one partition (with one ``acks``) between two requests of another shape
        appended in one write (see the module docstring). A request of another shape first has the
        requests gathered before it appended, then is served alone.
        ``requests`` is taken one at a time (the processor ends it once an answer closes the connection)."""
        groups: dict[tuple[TopicPartition, int], list[_Recognised]] = {}
        for request in requests:
            recognised = self._recognise(request)
            if recognised is not None:
                target = recognised[0]
                group = groups.get(target.key)
                if group is None:
                    groups[target.key] = [(request, *recognised)]
                else:
                    group.append((request, *recognised))
                continue
            if groups and not self._append_groups(groups):
                return  # a failure closed the connection
            groups = {}
            handle(request)
        if groups:
            self._append_groups(groups)

    def _append_groups(self, groups: dict[tuple[TopicPartition, int], list[_Recognised]]) -> bool:
        """Append and answer each partition's group in turn; False if a failure closed the connection.

        Then the groups after the failed one are not appended, and each of their requests is answered by
        closing the connection too: one of them may come before the failed request (``p0 p1 p0`` failing
        at the second ``p0``), and a request left without an answer would keep its connection muted. The
        processor closes the connection at the first of those answers in request order and drops the
        others."""
        pending = list(groups.values())
        for index, group in enumerate(pending):
            if self._append_group(group):
                continue
            reason = "an earlier request of the connection failed"
            for later in pending[index + 1 :]:
                for request, _, _ in later:
                    self._channel.send_response(NetworkResponse(request, (), close_after=True, reason=reason))
            return False
        return True

    def _recognise(self, request: NetworkRequest) -> tuple[_Target, Buffer] | None:
        """The partition of the learnt request ``request`` is and its records, if its principal may write
        to the topic."""
        known = self._learnt.get(request.connection_id)
        if known is None:
            return None
        frame = request.frame
        for learnt in known:
            found = learnt.template.partition_records_of(frame)
            if found is not None:
                break
        else:
            return None
        auth = self._auth
        if auth.enabled and not auth.authorize(
            request.session, AclOperation.WRITE, ResourceType.TOPIC, learnt.topic
        ):
            return None  # the general path refuses it, naming why
        partition, records = found
        key = (learnt.version, learnt.topic, partition, learnt.acks)
        target = self._targets.get(key)
        if target is None:
            if len(self._targets) >= MAX_TARGETS:
                self._targets.clear()
            tp = TopicPartition(learnt.topic, partition)
            answer = produce_answer(learnt.version, learnt.topic, partition)
            target = self._targets[key] = _Target(tp, learnt.acks, answer, (tp, learnt.acks))
        return target, records

    def _append_one(self, request: NetworkRequest, target: _Target, records: Buffer) -> None:
        """Append a recognised request and answer it."""
        self.taken += 1
        replicas = self._replicas
        with replicas.completing_here():  # the followers' waiting fetches are answered here
            partition: Partition | None = None
            try:
                partition = replicas.leader_partition(self._cluster.view, target.tp)
                outcome: _Outcome = replicas.append_to_local_log(partition, records, target.acks)
            except _APPEND_ERRORS as exc:
                outcome = exc
            self._reply(request, target, partition, outcome)

    def _append_group(self, group: list[_Recognised]) -> bool:
        """Append ``group`` (recognised requests to one partition, one ``acks``) in one write and answer
        each in order; False if a failure closed the connection at the first request not answered
        (nothing more is then served)."""
        answered = 0
        try:
            if len(group) == 1:
                self._append_one(*group[0])
                return True
            self.taken += len(group)
            self.grouped += len(group)
            self.group_writes += 1
            replicas = self._replicas
            tp, acks = group[0][1].key
            with replicas.completing_here():
                partition: Partition | None = None
                try:
                    partition = replicas.leader_partition(self._cluster.view, tp)
                    outcomes: Sequence[_Outcome] = replicas.append_many(
                        partition, [records for _, _, records in group], acks
                    )
                except _APPEND_ERRORS as exc:
                    outcomes = [exc] * len(group)
                for (request, target, _), outcome in zip(group, outcomes, strict=True):
                    self._reply(request, target, partition, outcome)
                    answered += 1
        except Exception as exc:  # as KafkaApis.handle: the connection closes, the broker goes on
            failed = group[answered][0]
            logger.exception("%s: a Produce request failed", failed.peer)
            reason = f"handling failed: {exc!r}"
            self._channel.send_response(NetworkResponse(failed, (), close_after=True, reason=reason))
            return False
        return True

    def _reply(
        self, request: NetworkRequest, target: _Target, partition: Partition | None, outcome: _Outcome
    ) -> None:
        """Answer a recognised request from its append's ``outcome``: packed from the learnt answer when it
        succeeded and needs no wait, else as the general path goes on (see the module docstring)."""
        tp, acks = target.key
        if not isinstance(outcome, AppendInfo):
            self._general(request, {tp: ProduceResult(outcome, None, partition)}, acks)
            return
        if partition is None:  # pragma: no cover - an append is made to its partition
            raise TypeError(f"{tp}: an append without its partition")
        if acks == -1 and (
            partition.flush_on_ack or partition.check_enough_replicas(outcome.last_offset + 1) != (True, None)
        ):
            self._general(request, {tp: ProduceResult(None, outcome, partition)}, acks)
            return
        self.served += 1
        (correlation_id,) = _CORRELATION_ID.unpack_from(request.frame, 4)
        answer = target.answer.encode(
            correlation_id, outcome.first_offset, outcome.log_append_time_ms, partition.log_start_offset
        )
        self._channel.send_response(NetworkResponse(request, (answer,)))

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
