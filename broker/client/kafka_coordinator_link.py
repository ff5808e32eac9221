#: Errors that say the coordinator moved or is not there: find it again.
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
)


class _CoordinatorLostError(ClientError):
    """The coordinator moved, is not there or is unreachable: find it again."""


class _RejoinError(GroupError):
    """The generation is over (or the member unknown): prepare and join again."""


class _CommitRefusedError(ClientError):
    """The coordinator refused a commit for a reason other than the generation (the member goes on)."""


    # ------------------------------------------------------------------------------ 1. the coordinator

    def _find_coordinator(self) -> None:
        if self._coordinator is not None:
            return
        try:
            self._coordinator = find_group_coordinator(self._pool, self._metadata, self.group)
        except CoordinatorNotFoundError as exc:
            raise _CoordinatorLostError(str(exc)) from exc
        log.info("group %s: coordinator is %s", self.group, self._coordinator)

    def _request(self, body: Any, *, join: bool = False, version: int | None = None) -> Any:
        """Send ``body`` to the coordinator and wait for the answer."""
        coordinator = self._coordinator
        if coordinator is None:
            raise _CoordinatorLostError("not known")
        pool = self._join_pool if join else self._pool
        connection = pool.get(coordinator)
        return connection.request(body, version=version)

    def _check(self, error_code: int, what: str) -> None:
        """Raise for a coordinator error code (the caller handles the others)."""
        if error_code in _COORDINATOR_ERRORS:
            raise _CoordinatorLostError(f"{what}: {ErrorCode.name_of(error_code)}")

