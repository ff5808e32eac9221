"""A Kafka-protocol group member's offsets: the commits of the consumed positions (step 2's before a
rebalance, step 6's every ``auto_commit_interval_ms`` and on :meth:`KafkaGroupMembership.commit`, step 7's
before leaving) and the committed offsets a new generation starts from (step 5), as
:mod:`broker.client.groups.kafka.kafka_group_membership` numbers the steps. Mixed into
:class:`~broker.client.groups.kafka.kafka_group_membership.KafkaGroupMembership` (its state and threads are
described there; only the coordination thread calls these methods).

A commit sends only the positions that changed since the partition's last commit
(:attr:`OwnedPartition.committed`); a partition's answer moves that mark only when it succeeded.
OffsetCommit goes with the member's generation: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and
REBALANCE_IN_PROGRESS end it (:class:`~broker.client.groups.kafka.kafka_coordinator_link.RejoinError`);
COORDINATOR_LOAD_IN_PROGRESS retries. OffsetFetch is sent at the newest version whose layout the member
speaks (one group, topics by name).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import BrokerConnectionError, GroupError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.kafka.kafka_coordinator_link import (
    CommitRefusedError,
    CoordinatorLostError,
    KafkaCoordinatorLink,
    RejoinError,
)
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: The newest OffsetFetch version whose layout (one group, topics by name) this member sends.
_OFFSET_FETCH_MAX_VERSION = 7


@dataclass
class OwnedPartition:
    """A partition this member's generation gives it: its stream and the offset last committed."""

    stream: MessageStream
    number: int
    committed: int | None


class KafkaGroupOffsets(KafkaCoordinatorLink):
    """The offsets part of a Kafka-protocol member (see the module docstring)."""

    # The member's state these methods use (set by KafkaGroupMembership.__init__).
    _config: GroupConfig
    _cond: threading.Condition
    _closing: threading.Event
    _instance_id: str | None
    _request_timeout_ms: int
    _owned: dict[TopicPartition, OwnedPartition]
    member_id: str
    generation_id: int

    # ------------------------------------------------------------------------------ offsets

    def _commit(self) -> None:
        """Commit every owned partition's consumed position that changed."""
        with self._cond:
            positions = {tp: owned.stream.position(tp) for tp, owned in self._owned.items()}
        commits = {
            tp: position
            for tp, position in positions.items()
            if position is not None and position != self._owned[tp].committed
        }
        if commits:
            self._send_commit(commits)

    def _send_commit(self, commits: Mapping[TopicPartition, int]) -> None:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(commits.items()):
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequestPartition(partition_index=tp.partition, committed_offset=offset)
            )
        while True:
            response = self._request(
                OffsetCommitRequest(
                    group_id=self.group,
                    generation_id_or_member_epoch=self.generation_id,
                    member_id=self.member_id,
                    group_instance_id=self._instance_id,
                    topics=[OffsetCommitRequestTopic(name, parts) for name, parts in by_topic.items()],
                )
            )
            codes = {
                TopicPartition(topic.name, part.partition_index): part.error_code
                for topic in response.topics
                for part in topic.partitions
            }
            failed = {tp: code for tp, code in codes.items() if code != ErrorCode.NONE}
            for tp, offset in commits.items():
                owned = self._owned.get(tp)
                if tp not in failed and owned is not None:
                    owned.committed = offset
            if not failed:
                log.debug("group %s: committed %s", self.group, {str(tp): o for tp, o in commits.items()})
                return
            code = next(iter(failed.values()))
            self._check(code, "OffsetCommit")
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                if self._closing.wait(self._config.retry_backoff_ms / 1000):
                    raise CoordinatorLostError("still loading the group as the member closes")
                continue
            if code in (
                ErrorCode.ILLEGAL_GENERATION,
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.REBALANCE_IN_PROGRESS,
            ):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                raise RejoinError(f"OffsetCommit of {sorted(failed)}: {ErrorCode.name_of(code)}")
            raise CommitRefusedError(
                f"group {self.group}: OffsetCommit failed for {sorted(failed)}: {ErrorCode.name_of(code)} "
                f"(error code {code})"
            )

    def _fetch_committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = OffsetFetchRequest(
            group_id=self.group,
            topics=[OffsetFetchRequestTopic(name, numbers) for name, numbers in by_topic.items()],
        )
        while True:
            coordinator = self._coordinator
            if coordinator is None:
                raise CoordinatorLostError("not known")
            version = min(
                self._pool.get(coordinator).api_version(int(ApiKey.OFFSET_FETCH)), _OFFSET_FETCH_MAX_VERSION
            )
            response = self._request(body, version=version)
            code = response.error_code
            if code == ErrorCode.NONE:
                for topic in response.topics:
                    for part in topic.partitions:
                        if part.error_code != ErrorCode.NONE:
                            code = part.error_code
            self._check(code, "OffsetFetch")
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._closing.wait(self._config.retry_backoff_ms / 1000)
                if self._closing.is_set():
                    raise BrokerConnectionError(str(coordinator), "the member is closing")
                continue
            if code != ErrorCode.NONE:
                raise GroupError(
                    f"group {self.group}: OffsetFetch failed: {ErrorCode.name_of(code)} (error code {code})"
                )
            found: dict[TopicPartition, int | None] = dict.fromkeys(partitions)
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if tp in found and part.committed_offset >= 0:
                        found[tp] = part.committed_offset
            return found

    def _commit_before_release(self, commits: Mapping[TopicPartition, int]) -> None:
        """Commit what is given up; the coordinator moving meanwhile is found again and the commit
        retried, for up to ``request_timeout_ms`` (after that the next owners deliver these again)."""
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while True:
            try:
                self._find_coordinator()
                self._send_commit(commits)
            except (CoordinatorLostError, BrokerConnectionError):
                self._coordinator = None
                if time.monotonic() >= deadline or self._closing.is_set():
                    raise
                time.sleep(self._config.retry_backoff_ms / 1000)
            else:
                return
