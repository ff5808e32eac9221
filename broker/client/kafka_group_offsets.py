#: The newest OffsetFetch version whose layout (one group, topics by name) this member sends.
_OFFSET_FETCH_MAX_VERSION = 7
    def _commit_before_release(self, commits: Mapping[TopicPartition, int]) -> None:
        """Commit what is given up; the coordinator moving meanwhile is found again and the commit
        retried, for up to ``request_timeout_ms`` (after that the next owners deliver these again)."""
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while True:
            try:
                self._find_coordinator()
                self._send_commit(commits)
            except (_CoordinatorLostError, BrokerConnectionError):
                self._coordinator = None
                if time.monotonic() >= deadline or self._closing.is_set():
                    raise
                time.sleep(self._config.retry_backoff_ms / 1000)
            else:
                return

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
                    raise _CoordinatorLostError("still loading the group as the member closes")
                continue
            if code in (
                ErrorCode.ILLEGAL_GENERATION,
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.REBALANCE_IN_PROGRESS,
            ):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                raise _RejoinError(f"OffsetCommit of {sorted(failed)}: {ErrorCode.name_of(code)}")
            raise _CommitRefusedError(
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
                raise _CoordinatorLostError("not known")
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

