"""The registry's state in ZooKeeper: ids, schemas, subjects, versions and compatibility config.

Every znode the registry uses is below one root (``[registry] zookeeper_path``, default ``/schema_registry``,
itself below the connect string's chroot)::

    <root>/id_counter                       the last id handed out, ASCII decimal ("0" before the first)
    <root>/ids/<id>                         the schema's normalized text (UTF-8), never changed once written
    <root>/ids/<id>/<subject>@<version>     empty: one child per subject version (live or soft-deleted) that
                                            references the id, so deleting ids/<id> fails while one exists
    <root>/fingerprints/<sha256>            the id (ASCII decimal) of the schema whose normalized text has
                                            this SHA-256 (hex)
    <root>/subjects/<subject>               JSON {"live": <number of live versions>}; its data version is
                                            bumped by every change of the subject
    <root>/subjects/<subject>/<version>     JSON {"id": <id>, "deleted": <soft-deleted?>}; the version is
                                            zero-padded to 10 digits
    <root>/config                           JSON {"compatibilityLevel": "<LEVEL>"}; absent: the default
    <root>/subject_configs/<subject>        JSON {"compatibilityLevel": "<LEVEL>"} for one subject

``<subject>`` is the subject name with every byte of its UTF-8 form outside ``[A-Za-z0-9_-]`` written as
``%XX`` (so ``.``, ``/`` and ``@`` never reach a znode name).

Invariants, each kept by a single ZooKeeper multi-op (all or nothing):

* **Ids are global and increasing, and one id is one schema.** A new id is the counter plus one; the multi
  that sets the counter (compare-and-set on the counter's znode version) also creates ``ids/<id>``,
  ``fingerprints/<sha256>`` and the version that uses it. Two registries racing either both find the
  fingerprint (same id) or one loses the compare-and-set (or the fingerprint create) and retries.
* **A subject changes one step at a time.** Every change of a subject sets (or creates, or deletes) its
  znode with the data version read before, so a registration's compatibility check always saw the versions it
  is added after; a lost race retries from a fresh read.
* **An id outlives every version that references it.** ``ids/<id>`` (and its fingerprint) is deleted only in
  the multi that removes its last reference; a concurrent registration that adds a reference makes that
  delete fail (not empty), and a registration whose id vanished fails to create its reference (no node).

A lost race raises :class:`~schemas.errors.ConcurrentUpdateError` (the caller re-reads and retries); any other
ZooKeeper failure raises :class:`~schemas.errors.StoreError`. Thread-safe (a kazoo client is).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar
from urllib.parse import unquote

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.handlers.threading import KazooTimeoutError

from schemas.errors import ConcurrentUpdateError, StoreError

P = ParamSpec("P")
R = TypeVar("R")

_SAFE = frozenset(string.ascii_letters + string.digits + "_-")
_VERSION_DIGITS = 10
_RACE_ERRORS = (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError)
_READ_ATTEMPTS = 20


def escape_subject(subject: str) -> str:
    """The znode name of a subject: UTF-8 bytes outside ``[A-Za-z0-9_-]`` as ``%XX``."""
    return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in subject)


def unescape_subject(name: str) -> str:
    return unquote(name, errors="strict")


@dataclass(frozen=True)
class VersionEntry:
    """One version of a subject as stored."""

    version: int
    schema_id: int
    deleted: bool


@dataclass(frozen=True)
class SubjectState:
    """A consistent read of one subject: its versions (ascending) and its znode's data version."""

    subject: str
    znode_version: int
    versions: tuple[VersionEntry, ...]

    @property
    def live(self) -> tuple[VersionEntry, ...]:
        """The versions that are not soft-deleted."""
        return tuple(v for v in self.versions if not v.deleted)

    def entry(self, version: int) -> VersionEntry | None:
        return next((v for v in self.versions if v.version == version), None)

    @property
    def next_version(self) -> int:
        return self.versions[-1].version + 1 if self.versions else 1


def _store_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Map kazoo's errors to :class:`StoreError` (a lost race stays a :class:`ConcurrentUpdateError`).

    kazoo queues a request made while the connection is down until it is back, however long that takes, so
    the store first waits (bounded) for a connection and fails with :class:`StoreError` without one.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        store = args[0]
        if isinstance(store, SchemaStore):
            store.await_connection(fn.__name__)
        try:
            return fn(*args, **kwargs)
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreError(
                f"ZooKeeper failed during {fn.__name__}: {type(exc).__name__}: {exc or 'no detail'}"
            ) from exc

    return wrapper


class SchemaStore:
    """The registry's ZooKeeper store (layout and invariants in the module docstring)."""

    def __init__(
        self, client: KazooClient, root: str = "/schema_registry", connection_wait_s: float = 3.0
    ) -> None:
        self.client = client
        self.root = root.rstrip("/")
        self.connection_wait_s = connection_wait_s

    def await_connection(self, what: str) -> None:
        """Return once the client is connected; :class:`StoreError` after ``connection_wait_s`` without."""
        deadline = time.monotonic() + self.connection_wait_s
        while not self.client.connected:
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"ZooKeeper failed during {what}: not connected (state {self.client.state}) for "
                    f"{self.connection_wait_s:.1f} s"
                )
            time.sleep(0.05)

    # -- paths ---------------------------------------------------------------------------------------------

    @property
    def counter_path(self) -> str:
        return f"{self.root}/id_counter"

    @property
    def global_config_path(self) -> str:
        return f"{self.root}/config"

    def id_path(self, schema_id: int) -> str:
        return f"{self.root}/ids/{schema_id}"

    def reference_path(self, schema_id: int, subject: str, version: int) -> str:
        return f"{self.id_path(schema_id)}/{escape_subject(subject)}@{version}"

    def fingerprint_path(self, fingerprint: str) -> str:
        return f"{self.root}/fingerprints/{fingerprint}"

    def subject_path(self, subject: str) -> str:
        return f"{self.root}/subjects/{escape_subject(subject)}"

    def version_path(self, subject: str, version: int) -> str:
        return f"{self.subject_path(subject)}/{version:0{_VERSION_DIGITS}d}"

    def subject_config_path(self, subject: str) -> str:
        return f"{self.root}/subject_configs/{escape_subject(subject)}"

    # -- setup ---------------------------------------------------------------------------------------------

    @_store_errors
    def ensure_layout(self) -> None:
        """Create the root folders and the id counter if they are missing (idempotent)."""
        for folder in ("ids", "fingerprints", "subjects", "subject_configs"):
            self.client.ensure_path(f"{self.root}/{folder}")
        with contextlib.suppress(NodeExistsError):
            self.client.create(self.counter_path, b"0")

    # -- ids -----------------------------------------------------------------------------------------------

    @_store_errors
    def schema_text(self, schema_id: int) -> str | None:
        """The normalized schema text of an id, or None if there is no such id."""
        if schema_id < 1:
            return None
        try:
            data, _ = self.client.get(self.id_path(schema_id))
        except NoNodeError:
            return None
        return bytes(data).decode("utf-8")

    @_store_errors
    def id_for_fingerprint(self, fingerprint: str) -> int | None:
        try:
            data, _ = self.client.get(self.fingerprint_path(fingerprint))
        except NoNodeError:
            return None
        return int(data)

    @_store_errors
    def references(self, schema_id: int) -> list[tuple[str, int]] | None:
        """The (subject, version) pairs referencing an id, sorted; None if there is no such id."""
        try:
            children = self.client.get_children(self.id_path(schema_id))
        except NoNodeError:
            return None
        refs = []
        for child in children:
            name, _, version = child.rpartition("@")
            refs.append((unescape_subject(name), int(version)))
        return sorted(refs)

    @_store_errors
    def max_id(self) -> int:
        data, _ = self.client.get(self.counter_path)
        return int(data)

    # -- subjects ------------------------------------------------------------------------------------------

    @_store_errors
    def subject_live_counts(self) -> dict[str, int]:
        """Every subject with at least one version, with its number of live versions."""
        children = self.client.get_children(f"{self.root}/subjects")
        pending = [(child, self.client.get_async(f"{self.root}/subjects/{child}")) for child in children]
        counts = {}
        for child, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue  # deleted since the listing
            counts[unescape_subject(child)] = int(json.loads(data)["live"])
        return counts

    @_store_errors
    def subject_state(self, subject: str) -> SubjectState | None:
        """A consistent read of a subject (retried while it changes underneath), or None if it has no node."""
        path = self.subject_path(subject)
        for _ in range(_READ_ATTEMPTS):
            try:
                _, stat = self.client.get(path)
                children = self.client.get_children(path)
                pending = [(child, self.client.get_async(f"{path}/{child}")) for child in children]
                entries = []
                for child, result in pending:
                    data, _ = result.get()
                    doc = json.loads(data)
                    entries.append(VersionEntry(int(child), int(doc["id"]), bool(doc["deleted"])))
                _, stat_after = self.client.get(path)
            except NoNodeError:
                if not self.client.exists(path):
                    return None
                continue
            if stat_after.version == stat.version:
                return SubjectState(subject, stat.version, tuple(sorted(entries, key=lambda e: e.version)))
        raise ConcurrentUpdateError(
            f"subject {subject!r} changed during each of {_READ_ATTEMPTS} attempts to read it"
        )

    @_store_errors
    def add_version(
        self,
        subject: str,
        state: SubjectState | None,
        schema_id: int | None,
        canonical: str,
        fingerprint: str,
    ) -> tuple[int, int]:
        """Add the next version of ``subject`` (read as ``state``) with ``schema_id`` (None: a new id).

        Returns (id, version). Raises :class:`ConcurrentUpdateError` if anything it relied on changed.
        """
        version = state.next_version if state is not None else 1
        live = len(state.live) + 1 if state is not None else 1
        txn = self.client.transaction()
        summary = json.dumps({"live": live}).encode()
        if state is None:
            txn.create(self.subject_path(subject), summary)
        else:
            txn.set_data(self.subject_path(subject), summary, version=state.znode_version)
        if schema_id is None:
            data, stat = self.client.get(self.counter_path)
            schema_id = int(data) + 1
            txn.set_data(self.counter_path, str(schema_id).encode(), version=stat.version)
            txn.create(self.id_path(schema_id), canonical.encode("utf-8"))
            txn.create(self.fingerprint_path(fingerprint), str(schema_id).encode())
        txn.create(
            self.version_path(subject, version), json.dumps({"id": schema_id, "deleted": False}).encode()
        )
        txn.create(self.reference_path(schema_id, subject, version), b"")
        self._commit(txn, f"adding version {version} (id {schema_id}) to subject {subject!r}")
        return schema_id, version

    @_store_errors
    def soft_delete(self, state: SubjectState, versions: Sequence[int]) -> None:
        """Mark ``versions`` of the subject soft-deleted (they keep their ids and version numbers)."""
        doomed = set(versions)
        live = sum(1 for e in state.versions if not e.deleted and e.version not in doomed)
        txn = self.client.transaction()
        txn.set_data(
            self.subject_path(state.subject), json.dumps({"live": live}).encode(), version=state.znode_version
        )
        for entry in state.versions:
            if entry.version in doomed:
                txn.set_data(
                    self.version_path(state.subject, entry.version),
                    json.dumps({"id": entry.schema_id, "deleted": True}).encode(),
                )
        self._commit(txn, f"soft-deleting versions {sorted(doomed)} of subject {state.subject!r}")

    @_store_errors
    def hard_delete(self, state: SubjectState, versions: Sequence[int]) -> list[int]:
        """Remove ``versions`` of the subject for good; ids no other version references go too.

        Returns the ids removed. The subject's znode goes with its last version.
        """
        doomed = [e for e in state.versions if e.version in set(versions)]
        remaining = [e for e in state.versions if e.version not in set(versions)]
        subject = state.subject
        txn = self.client.transaction()
        for entry in doomed:
            txn.delete(self.version_path(subject, entry.version))
            txn.delete(self.reference_path(entry.schema_id, subject, entry.version))
        if remaining:
            live = sum(1 for e in remaining if not e.deleted)
            txn.set_data(
                self.subject_path(subject), json.dumps({"live": live}).encode(), version=state.znode_version
            )
        else:
            txn.delete(self.subject_path(subject), version=state.znode_version)
        removed_ids = []
        for schema_id in sorted({e.schema_id for e in doomed}):
            ours = {f"{escape_subject(subject)}@{e.version}" for e in doomed if e.schema_id == schema_id}
            try:
                refs = set(self.client.get_children(self.id_path(schema_id)))
                data, _ = self.client.get(self.id_path(schema_id))
            except NoNodeError as exc:
                raise ConcurrentUpdateError(
                    f"id {schema_id} vanished while deleting from {subject!r}"
                ) from exc
            if refs <= ours:  # nothing else references it: it goes in the same multi (fails if one appears)
                txn.delete(self.id_path(schema_id))
                fingerprint = _sha256(bytes(data))
                found = self.client.exists(self.fingerprint_path(fingerprint))
                if found is not None:
                    txn.delete(self.fingerprint_path(fingerprint))
                removed_ids.append(schema_id)
        self._commit(txn, f"hard-deleting versions {[e.version for e in doomed]} of subject {subject!r}")
        return removed_ids

    # -- config --------------------------------------------------------------------------------------------

    @_store_errors
    def global_level(self) -> str | None:
        return self._read_level(self.global_config_path)

    @_store_errors
    def set_global_level(self, level: str) -> None:
        self._write_level(self.global_config_path, level)

    @_store_errors
    def subject_level(self, subject: str) -> str | None:
        return self._read_level(self.subject_config_path(subject))

    @_store_errors
    def set_subject_level(self, subject: str, level: str) -> None:
        self._write_level(self.subject_config_path(subject), level)

    @_store_errors
    def delete_subject_level(self, subject: str) -> str | None:
        """Remove a subject's level; return what it was (None if it had none)."""
        path = self.subject_config_path(subject)
        try:
            data, stat = self.client.get(path)
            self.client.delete(path, version=stat.version)
        except NoNodeError:
            return None
        return str(json.loads(data)["compatibilityLevel"])

    def _read_level(self, path: str) -> str | None:
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return None
        return str(json.loads(data)["compatibilityLevel"])

    def _write_level(self, path: str, level: str) -> None:
        value = json.dumps({"compatibilityLevel": level}).encode()
        try:
            self.client.set(path, value)
        except NoNodeError:
            try:
                self.client.create(path, value)
            except NodeExistsError:
                self.client.set(path, value)

    # -- transactions --------------------------------------------------------------------------------------

    def _commit(self, txn: Any, what: str) -> None:
        results = txn.commit()
        failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if not failures:
            return
        failure = failures[0]
        if isinstance(failure, _RACE_ERRORS):
            raise ConcurrentUpdateError(f"{what}: lost a race ({type(failure).__name__})") from failure
        raise StoreError(f"{what}: ZooKeeper refused the update: {type(failure).__name__}: {failure}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
