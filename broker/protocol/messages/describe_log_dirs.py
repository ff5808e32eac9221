"""DescribeLogDirs (key 35), v1-v4: each log dir of the broker, and the size of each partition's log in it.

Kafka 4.4 serves v1-v5 (v0 is gone since Kafka 4.0; v2+ flexible; v3 adds the top-level error, v4 the dir's
total and usable bytes). Lumber stops at v4: v5 adds whether a dir is cordoned (KIP-1066), which Lumber's
dirs never are, and clients read a broker that serves v5 as Kafka 4.3 (kafka-python's version probe), which
Lumber is not. Seen sent: kafka-python 3.0's ``describe_log_dirs`` and
Kafka's ``kafka-log-dirs`` tool. Null ``topics`` asks for every partition.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class DescribableLogDirTopic(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[int], wire(array("int32"))] = ()


class DescribeLogDirsRequest(NamedTuple):
    topics: Annotated[
        Sequence[DescribableLogDirTopic] | None, wire(array(DescribableLogDirTopic), nullable="0+")
    ] = None


class DescribeLogDirsPartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    partition_size: Annotated[int, wire("int64")] = 0
    offset_lag: Annotated[int, wire("int64")] = 0
    is_future_key: Annotated[bool, wire("bool")] = False


class DescribeLogDirsTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[DescribeLogDirsPartition], wire(array(DescribeLogDirsPartition))] = ()


class DescribeLogDirsResult(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    log_dir: Annotated[str, wire("string")] = ""
    topics: Annotated[Sequence[DescribeLogDirsTopic], wire(array(DescribeLogDirsTopic))] = ()
    total_bytes: Annotated[int, wire("int64", "4+")] = -1
    usable_bytes: Annotated[int, wire("int64", "4+")] = -1


class DescribeLogDirsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16", "3+")] = 0
    results: Annotated[Sequence[DescribeLogDirsResult], wire(array(DescribeLogDirsResult))] = ()


DESCRIBE_LOG_DIRS = ApiSpec(
    key=ApiKey.DESCRIBE_LOG_DIRS,
    request=DescribeLogDirsRequest,
    response=DescribeLogDirsResponse,
    min_version=1,
    max_version=4,
    flexible_from=2,
)
