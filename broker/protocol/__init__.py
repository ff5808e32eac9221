"""Lumber's codec for the documented subset of the Kafka wire protocol that its broker speaks.

Unmodified kafka-python 3.x and librdkafka 2.x clients (confluent-kafka, kcat) negotiate with the broker
through ApiVersions and use the highest version both sides implement. Lumber implements:

===============  ===  ========  ========  ===========================================================
API              key  versions  flexible  why this range
===============  ===  ========  ========  ===========================================================
Produce            0  0-9       9+        v9 is kafka-python's highest; older librdkafka 2.x turns gzip
                                          and snappy off unless the range includes v0 (librdkafka#4956,
                                          why Kafka 4.0 still advertises v0, KAFKA-18659), and zstd off
                                          below v7; v3+ carries record batch v2. v0-v2 requests decode,
                                          and a server answers their old-format message sets
                                          UNSUPPORTED_FOR_MESSAGE_FORMAT.
Fetch              1  4-12      12+       v4 is record batch v2 (librdkafka's MsgVer2); librdkafka
                                          enables zstd only if v10 is offered; v12 is kafka-python's
                                          highest; v13+ names topics by topic id, which Lumber lacks.
ListOffsets        2  1-6       6+        earliest (-2), latest (-1) and by timestamp; v1 is the floor
                                          (librdkafka's OffsetTime feature, Kafka 4.0's minimum); v7 only
                                          adds MAX_TIMESTAMP (-3), which consumers never send.
Metadata           3  0-12      9+        the whole range both clients use; v13 (Kafka 4.0's top-level
                                          error code) is not needed by either.
OffsetCommit       8  2-9       8+        Kafka 4.0's range: librdkafka up to v9, kafka-python v8.
OffsetFetch        9  1-9       6+        Kafka 4.0's range; v8+ batches groups (librdkafka).
FindCoordinator   10  0-2       none      librdkafka enables lz4 only if v0 is offered; group keys answer
                                          the leader of the group's __consumer_offsets partition; v3+
                                          (flexible) and v4+ (batched keys) are needed by neither client.
JoinGroup         11  0-9       6+        Kafka's range; v4+ answers MEMBER_ID_REQUIRED first (KIP-394).
Heartbeat         12  0-4       4+        Kafka's range.
LeaveGroup        13  0-5       4+        Kafka's range; v3+ leaves a batch of members.
SyncGroup         14  0-5       4+        Kafka's range; v5 checks the protocol type and name.
DescribeGroups    15  0-5       5+        Kafka 4.0's range (v6 only adds an error message).
ListGroups        16  0-5       3+        Kafka's range; v4 filters by state, v5 by type.
ApiVersions       18  0-4       3+        kafka-python starts at v4, librdkafka at v3; a newer request
                                          gets the v0-format UNSUPPORTED_VERSION fallback.
CreateTopics      19  2-7       5+        Kafka 4.0's range; both admin clients negotiate in it.
DeleteTopics      20  1-6       4+        Kafka 4.0's range.
InitProducerId    22  0-4       2+        kafka-python producers are idempotent by default and ask for a
                                          producer id first; v4 is kafka-python's highest.
OffsetFor-        23  2-4       4+        followers find where their log diverges from the leader's
LeaderEpoch                               (KIP-101/279); consumers validate their position after a
                                          leader change (KIP-320). v2 adds the current leader epoch
                                          that fences old metadata; v0-v1 are deprecated.
DescribeConfigs   32  1-4       4+        Kafka 4.0's range (KIP-896 dropped v0); librdkafka's highest
                                          is v1, kafka-python 3.x's floor v1 and highest v4; v1 adds
                                          sources and synonyms, v3 types and documentation.
AlterConfigs      33  0-2       2+        Kafka 4.0's range; librdkafka sends v2, kafka-python (only
                                          with ``incremental=False``) v2 too.
DeleteGroups      42  0-2       2+        Kafka's range.
Incremental-      44  0-1       1+        Kafka 4.0's range (KIP-339); librdkafka and kafka-python
AlterConfigs                              (its default for ``alter_configs``) both send v1.
OffsetDelete      47  0         none      the only version (KIP-496).
===============  ===  ========  ========  ===========================================================

Nothing else is advertised, and on purpose: without fetch sessions in the answers (``session_id`` 0)
they send full fetches; without GetTelemetrySubscriptions librdkafka sends no telemetry; the admin
clients' create, list and delete use only CreateTopics, Metadata and DeleteTopics, and their topic configs
DescribeConfigs, AlterConfigs and IncrementalAlterConfigs. With these ranges kafka-python identifies the
broker as Kafka 3.2 (its newest probe that matches is JoinGroup v9), which keeps zstd, idempotence and
incremental fetch requests on. Each group API's module says which versions each client sends and why its
range is what it is.

What the clients were seen to send through this codec (kafka-python 3.0.12, librdkafka 2.16.0):
kafka-python producer ApiVersions v4, Metadata v12, InitProducerId v4, Produce v9; its assign-mode consumer
ListOffsets v6, Fetch v12; its admin client CreateTopics v7, DeleteTopics v6, DescribeConfigs v4,
IncrementalAlterConfigs v1. librdkafka ApiVersions v3, Metadata v12, Produce v9 (gzip, snappy, lz4 and
zstd all enabled), FindCoordinator v2, ListOffsets v6, Fetch v12, CreateTopics v4, DeleteTopics v4,
DescribeConfigs v1, AlterConfigs v2, IncrementalAlterConfigs v1. Group members (2026-11-27): kafka-python
FindCoordinator v2, JoinGroup v7, SyncGroup v5, LeaveGroup v5, OffsetCommit v8, OffsetFetch v8, and its
admin client ListGroups v5, DescribeGroups v5, DeleteGroups v2; librdkafka FindCoordinator v2, JoinGroup
v5, SyncGroup v3, Heartbeat v3, OffsetCommit v9, OffsetFetch v9.

What this asks of a server: Metadata's real leader epochs (from the partition state) and a
``controller_id`` that is a live broker (the admin clients send CreateTopics/DeleteTopics to it); Fetch,
ListOffsets and OffsetForLeaderEpoch ``current_leader_epoch`` checked against the leader's (-1: unchecked),
since clients send the epoch Metadata gave them; ignore ``session_id``/``session_epoch``, answer
``session_id`` 0; no response to Produce with ``acks`` 0; FindCoordinator the group's coordinator;
InitProducerId v3+ with a known producer id bumps its epoch; DeleteTopics v6 entries with only a topic
id get UNKNOWN_TOPIC_ID.
Bytes after a request body are ignored, as Kafka does: librdkafka sends an all-topics Metadata v12 request
with three stray bytes (see :mod:`.codec`), which therefore reads ``allow_auto_topic_creation`` false.

Layout: :mod:`.primitives` (the primitive types), :mod:`.schema` (how messages are declared, as data),
:mod:`.messages` (one module per API), :mod:`.compiler` (fast codecs generated per message and version),
:mod:`.interpreter` (the checked reference codec that names what failed), :mod:`.request_header`,
:mod:`.response_header` and :mod:`.frame` (framing, separate from bodies), :mod:`.apis` (the table above)
and :mod:`.codec` (whole requests and responses, including the Fetch response as chunks whose records
are left to ``sendfile``).

The names below (:data:`__all__`) are this package's API, each imported from its module on first use
(:func:`__getattr__`, PEP 562): importing one light module, such as :mod:`.error_code` for
:class:`ErrorCode`, does not declare every message and compile the codecs (the table above), which a
command that only reads its config or ZooKeeper (``lumber topics list``) never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.protocol.api_key import ApiKey
    from broker.protocol.api_spec import ApiSpec
    from broker.protocol.apis import SUPPORTED_APIS, RequestBody, ResponseBody, supported_api_versions
    from broker.protocol.codec import (
        Request,
        Response,
        api_versions_response,
        compile_all,
        decode_request,
        decode_response,
        encode_api_versions_fallback,
        encode_fetch_response,
        encode_request,
        encode_response,
    )
    from broker.protocol.error_code import ErrorCode
    from broker.protocol.errors import (
        EncodeError,
        FrameSizeError,
        MalformedMessageError,
        ProtocolError,
        SchemaDefinitionError,
        UnknownApiKeyError,
        UnsupportedVersionError,
    )
    from broker.protocol.frame import SIZE_PREFIX_BYTES, frame_size
    from broker.protocol.region import RecordsData, Region
    from broker.protocol.request_header import RequestHeader
    from broker.protocol.response_header import ResponseHeader

#: Each name of the API -> the module of this package that defines it.
_MODULE_OF: dict[str, str] = {
    "ApiKey": "api_key",
    "ApiSpec": "api_spec",
    "SUPPORTED_APIS": "apis",
    "RequestBody": "apis",
    "ResponseBody": "apis",
    "supported_api_versions": "apis",
    "Request": "codec",
    "Response": "codec",
    "api_versions_response": "codec",
    "compile_all": "codec",
    "decode_request": "codec",
    "decode_response": "codec",
    "encode_api_versions_fallback": "codec",
    "encode_fetch_response": "codec",
    "encode_request": "codec",
    "encode_response": "codec",
    "ErrorCode": "error_code",
    "EncodeError": "errors",
    "FrameSizeError": "errors",
    "MalformedMessageError": "errors",
    "ProtocolError": "errors",
    "SchemaDefinitionError": "errors",
    "UnknownApiKeyError": "errors",
    "UnsupportedVersionError": "errors",
    "SIZE_PREFIX_BYTES": "frame",
    "frame_size": "frame",
    "RecordsData": "region",
    "Region": "region",
    "RequestHeader": "request_header",
    "ResponseHeader": "response_header",
}

__all__ = [
    "SIZE_PREFIX_BYTES",
    "SUPPORTED_APIS",
    "ApiKey",
    "ApiSpec",
    "EncodeError",
    "ErrorCode",
    "FrameSizeError",
    "MalformedMessageError",
    "ProtocolError",
    "RecordsData",
    "Region",
    "Request",
    "RequestBody",
    "RequestHeader",
    "Response",
    "ResponseBody",
    "ResponseHeader",
    "SchemaDefinitionError",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "api_versions_response",
    "compile_all",
    "decode_request",
    "decode_response",
    "encode_api_versions_fallback",
    "encode_fetch_response",
    "encode_request",
    "encode_response",
    "frame_size",
    "supported_api_versions",
]


# hidden from mypy, which would otherwise take any name of the package (a typo too) as an ``object``
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """``broker.protocol.NAME``: imported from its module on first use, then kept in this module."""
        module = _MODULE_OF.get(name)
        if module is None:
            # a submodule (``from broker.protocol import compiler``): the import system imports it next
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value
