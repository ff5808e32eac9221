"""A client's view of the cluster, kept fresh: which brokers are up and which one leads each partition.

The view comes from a :class:`MetadataSource`: ZooKeeper
(:class:`~broker.client.metadata.zookeeper_metadata_source.ZooKeeperMetadataSource`, the paper's registry) or
Metadata requests to brokers
(:class:`~broker.client.metadata.bootstrap_metadata_source.BootstrapMetadataSource`). It is refreshed

* when a caller asks for a topic it does not know yet (:meth:`ClusterMetadata.wait_for_topic`);
* after an error that means the leader moved or went away (NOT_LEADER_OR_FOLLOWER,
  UNKNOWN_TOPIC_OR_PARTITION, a lost connection): callers :meth:`~ClusterMetadata.request_update`, and the
  next :meth:`~ClusterMetadata.maybe_update` refreshes, at most once per ``retry_backoff_ms``;
* at least every ``metadata_max_age_ms``.

Thread safety: :attr:`snapshot` is an immutable
:class:`~broker.client.metadata.cluster_snapshot.ClusterSnapshot` replaced atomically; refreshes are
serialised by a lock, and a caller arriving during a refresh waits for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from broker.client.errors import AuthenticationError, ClientConfigError, ClientError, UnknownTopicError
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_snapshot import ClusterSnapshot, PartitionInfo
from broker.client.settings import check_servers, parse_server

log = logging.getLogger(__name__)


class MetadataSource(Protocol):
    """Where a client learns the cluster from."""

    def describe(self) -> str:
        """Where, for error messages (``zookeeper 127.0.0.1:2181/x``, ``bootstrap servers ...``)."""
        ...

    def fetch(
        self, topics: Collection[str] | None, allow_auto_create: bool, previous: ClusterSnapshot
    ) -> ClusterSnapshot:
        """The cluster now: brokers, and ``topics`` (``None``: all); raises :class:`ClientError`."""
        ...

    def close(self) -> None: ...


class ClusterMetadata:
    """The client's current :class:`ClusterSnapshot` and the policy for refreshing it."""

    def __init__(
        self,
        source: MetadataSource,
        *,
        retry_backoff_ms: int,
        metadata_max_age_ms: int,
        allow_auto_create: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._max_age_s = metadata_max_age_ms / 1000
        self._allow_auto_create = allow_auto_create
        self._clock = clock
        #: The current snapshot (replaced, never changed, by each refresh): read it without locking.
        self.snapshot = ClusterSnapshot()
        self._topics: set[str] = set()
        self._lock = threading.Lock()
        self._stale = True
        self._updated_at = float("-inf")
        self._attempted_at = float("-inf")
        self._version = 0
        self.last_error: ClientError | None = None

    @property
    def version(self) -> int:
        """Incremented on every successful refresh."""
        return self._version

    @property
    def refused(self) -> AuthenticationError | None:
        """The last refresh's error when a broker refused the client's login or TLS handshake (cleared by a
        good refresh): the clients raise it rather than wait."""
        error = self.last_error
        return error if isinstance(error, AuthenticationError) else None

    @property
    def source(self) -> MetadataSource:
        return self._source

    def add_topics(self, topics: Iterable[str]) -> None:
        """Topics every refresh asks about from now on."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._stale = True

    def request_update(self) -> None:
        """The snapshot may be wrong (a leader moved, a broker went away): refresh at the next chance."""
        self._stale = True

    def needs_update(self) -> bool:
        now = self._clock()
        due = self._stale or now - self._updated_at >= self._max_age_s
        return due and now - self._attempted_at >= self._retry_backoff_s

    def maybe_update(self) -> bool:
        """Refresh if stale or old and the backoff allows it; ``False`` if that refresh failed (logged)."""
        if not self.needs_update():
            return True
        try:
            self.update()
        except ClientError as exc:
            log.info("cannot refresh the cluster metadata from %s: %s", self._source.describe(), exc)
            return False
        return True

    def update(self, topics: Collection[str] = ()) -> ClusterSnapshot:
        """Refresh now (the known topics plus ``topics``); raises :class:`ClientError` when it fails."""
        self.add_topics(topics)
        version = self._version
        with self._lock:
            if self._version != version and not self._stale:  # someone refreshed while we waited
                return self.snapshot
            self._attempted_at = self._clock()
            self._stale = False
            try:
                snapshot = self._source.fetch(sorted(self._topics), self._allow_auto_create, self.snapshot)
            except ClientError as exc:
                self._stale = True
                self.last_error = exc
                raise
            self.snapshot = snapshot
            self._updated_at = self._clock()
            self._version += 1
            self.last_error = None
            return snapshot

    def wait_for_topic(self, topic: str, timeout_ms: int) -> tuple[PartitionInfo, ...]:
        """The partitions of ``topic``, refreshing (every ``retry_backoff_ms``) until it is known.

        Raises :class:`UnknownTopicError` after ``timeout_ms``, naming the last answer or failure, and an
        :class:`AuthenticationError` at once.
        """
        found = self.snapshot.partitions(topic)
        if found:
            return found
        deadline = self._clock() + timeout_ms / 1000
        while True:
            try:
                snapshot = self.update([topic])
            except AuthenticationError:
                raise  # a refused login: waiting would not change the answer
            except ClientError as exc:
                detail = f"last refresh from {self._source.describe()} failed: {exc}"
            else:
                found = snapshot.partitions(topic)
                if found:
                    return found
                detail = f"{self._source.describe()} answers {snapshot.topic_error(topic)}"
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise UnknownTopicError(topic, timeout_ms, detail)
            time.sleep(min(max(self._retry_backoff_s, 0.01), remaining))

    def close(self) -> None:
        self._source.close()


def metadata_source(
    bootstrap_servers: Sequence[str],
    zookeeper_connect: str | None,
    pool: BrokerPool,
    *,
    section: str,
    timeout_ms: int,
) -> MetadataSource:
    """The source a client learns the cluster from: ZooKeeper when ``zookeeper_connect`` is given, else
    ``bootstrap_servers``; neither raises :class:`ClientConfigError` naming ``section``."""
    if zookeeper_connect:
        from broker.client.metadata.zookeeper_metadata_source import ZooKeeperMetadataSource  # noqa: PLC0415

        return ZooKeeperMetadataSource(zookeeper_connect, pool, timeout_ms=timeout_ms)
    if bootstrap_servers:
        check_servers(section, list(bootstrap_servers))
        from broker.client.metadata.bootstrap_metadata_source import BootstrapMetadataSource  # noqa: PLC0415

        return BootstrapMetadataSource([parse_server(server) for server in bootstrap_servers], pool)
    raise ClientConfigError(
        f"{section}: no cluster to learn from: give bootstrap_servers (host:port) or a ZooKeeper "
        "connect string"
    )
