"""The registry's operations, with Confluent Schema Registry's semantics, over a :class:`SchemaStore`.

Semantics (Confluent's, for Avro):

* **register**: a schema already live in the subject returns its id (idempotent on the normalized form,
  see :mod:`schemas.normalize`); otherwise it is checked against the subject's live versions under
  the subject's compatibility level (409 naming the rule and path) and added as the next version, reusing the
  id of an identical schema registered anywhere, else taking a new global id.
* **soft delete** (default) hides a version (or all of a subject's versions) from reads unless they ask for
  ``deleted=true``; ids and version numbers stay reserved and ``GET /schemas/ids/{id}`` still answers. Soft
  deleting what is already soft-deleted is 40404 (subject) or 40406 (version).
* **hard delete** (``permanent=true``) removes soft-deleted versions for good; it requires the soft delete
  first (40405 subject, 40407 version). An id goes only with the last version (of any subject) that
  references it. A permanent subject delete also removes the subject's compatibility level.
* **compatibility levels**: the subject's own, else the global one (``PUT /config``), else
  ``[registry] default_compatibility``.

Races between registries sharing one store are settled by the store's compare-and-set: a lost race re-reads
and retries (bounded). Thread-safe.
"""

from __future__ import annotations

import random
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from schemas.avro_schema import AvroSchema
from schemas.errors import (
    ConcurrentUpdateError,
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidSubjectError,
    InvalidVersionError,
    SchemaNotFoundError,
    StoreError,
    SubjectConfigNotFoundError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from schemas.registered_schema import RegisteredSchema
from schemas.registry.compatibility import check_compatibility
from schemas.registry.compatibility_level import CompatibilityLevel
from schemas.registry.config import RegistryConfig
from schemas.registry.schema_store import SchemaStore, SubjectState, VersionEntry

MAX_VERSION = 2**31 - 1
MAX_SUBJECT_CHARS = 255
_PARSED_CACHE_ENTRIES = 4096


def parse_version(raw: str) -> int | None:
    """A version path segment: ``latest`` / ``-1`` is None, else an int in [1, 2^31-1] (else 42202)."""
    text = raw.strip()
    if text.lower() == "latest" or text == "-1":
        return None
    if text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_VERSION:
        return int(text)
    raise InvalidVersionError(
        f"The specified version '{raw}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"'
    )


def check_subject(subject: str) -> None:
    """Subjects are 1-255 characters of valid Unicode without control characters (42208 otherwise)."""
    problem = None
    if not subject:
        problem = "it is empty"
    elif len(subject) > MAX_SUBJECT_CHARS:
        problem = f"it has {len(subject)} characters, more than {MAX_SUBJECT_CHARS}"
    elif any(unicodedata.category(c) in ("Cc", "Cs") for c in subject):
        problem = "it contains control characters or unpaired surrogates"
    if problem is not None:
        raise InvalidSubjectError(f"The specified subject {subject!r} is not valid: {problem}")


class SchemaRegistry:
    """Register, look up, check and delete schemas. See the module docstring for the semantics."""

    def __init__(
        self,
        store: SchemaStore,
        config: RegistryConfig,
        max_attempts: int = 100,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.config = config
        self.max_attempts = max_attempts
        self._sleep = sleep
        self._parsed: OrderedDict[int, AvroSchema] = OrderedDict()
        self._lock = threading.Lock()

    # -- parsing ---------------------------------------------------------------------------------------

    def parse_request_schema(
        self, schema_text: str, schema_type: str | None = None, references: Sequence[Any] | None = None
    ) -> AvroSchema:
        """Validate a request's schema: Avro only, no references, within ``max_schema_bytes`` (42201)."""
        if schema_type is not None and schema_type.upper() != "AVRO":
            raise InvalidSchemaError(
                f"Invalid schema: schemaType {schema_type!r} is not supported; this registry stores AVRO "
                "schemas only"
            )
        if references:
            raise InvalidSchemaError(
                "Invalid schema: schema references are not supported; inline the referenced named types"
            )
        limit = self.config.max_schema_bytes
        size = len(schema_text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InvalidSchemaError(f"Invalid schema: it has {size} bytes, more than the limit of {limit}")
        schema = AvroSchema.parse(schema_text)
        normalized_size = len(schema.canonical.encode("utf-8"))
        if normalized_size > limit:
            raise InvalidSchemaError(
                f"Invalid schema: its normalized form has {normalized_size} bytes, more than the limit "
                f"of {limit}"
            )
        return schema

    def schema_for_id(self, schema_id: int) -> AvroSchema:
        """The parsed schema of an id (cached: an id's schema never changes). 40403 if there is none."""
        with self._lock:
            cached = self._parsed.get(schema_id)
            if cached is not None:
                self._parsed.move_to_end(schema_id)
                return cached
        text = self.store.schema_text(schema_id)
        if text is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        schema = AvroSchema.parse(text)
        with self._lock:
            self._parsed[schema_id] = schema
            while len(self._parsed) > _PARSED_CACHE_ENTRIES:
                self._parsed.popitem(last=False)
        return schema

    def _referenced_schema(self, subject: str, entry: VersionEntry) -> AvroSchema:
        try:
            return self.schema_for_id(entry.schema_id)
        except SchemaNotFoundError as exc:
            raise StoreError(
                f"store inconsistent: subject {subject!r} version {entry.version} references id "
                f"{entry.schema_id}, which does not exist"
            ) from exc

    # -- retries ---------------------------------------------------------------------------------------

    def _backoff(self, attempt: int) -> None:
        self._sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))  # noqa: S311 - jitter, not security

    def _gave_up(self, what: str, last: ConcurrentUpdateError | None) -> StoreError:
        return StoreError(
            f"{what}: lost {self.max_attempts} races in a row to concurrent changes (last: {last})"
        )

    # -- register and look up --------------------------------------------------------------------------

    def register(
        self,
        subject: str,
        schema_text: str,
        schema_type: str | None = None,
        references: Sequence[Any] | None = None,
    ) -> int:
        """Register a schema under a subject; return its global id (see the module docstring)."""
        check_subject(subject)
        schema = self.parse_request_schema(schema_text, schema_type, references)
        return self.register_schema(subject, schema)[0]

    def register_schema(self, subject: str, schema: AvroSchema) -> tuple[int, int]:
        """Register a parsed schema; return (id, version)."""
        check_subject(subject)
        last: ConcurrentUpdateError | None = None
        for attempt in range(self.max_attempts):
            state = self.store.subject_state(subject)
            existing_id = self.store.id_for_fingerprint(schema.fingerprint)
            if state is not None and existing_id is not None:
                for entry in reversed(state.live):
                    if entry.schema_id == existing_id:
                        return existing_id, entry.version
            level = self.effective_level(subject)
            live = state.live if state is not None else ()
            targets = live if level.transitive else live[-1:]
            previous = [(e.version, self._referenced_schema(subject, e)) for e in targets]
            problems = check_compatibility(schema, previous, level)
            if problems:
                raise IncompatibleSchemaError(
                    f'Schema being registered is incompatible with an earlier schema for subject "{subject}" '
                    f"(compatibility level {level.value}), details: " + "; ".join(problems)
                )
            try:
                return self.store.add_version(
                    subject, state, existing_id, schema.canonical, schema.fingerprint
                )
            except ConcurrentUpdateError as exc:
                last = exc
                self._backoff(attempt)
        raise self._gave_up(f"registering a schema under subject {subject!r}", last)

    def lookup(
        self,
        subject: str,
        schema_text: str,
        schema_type: str | None = None,
        references: Sequence[Any] | None = None,
        deleted: bool = False,
    ) -> RegisteredSchema:
        """The version of ``subject`` holding this schema (the latest such). 40401 / 40403 if none."""
        check_subject(subject)
        schema = self.parse_request_schema(schema_text, schema_type, references)
        visible = self._visible(subject, deleted)
        schema_id = self.store.id_for_fingerprint(schema.fingerprint)
        for entry in reversed(visible):
            if entry.schema_id == schema_id:
                return RegisteredSchema(subject, entry.version, entry.schema_id, schema.canonical)
        raise SchemaNotFoundError("Schema not found")

    def _state(self, subject: str) -> SubjectState | None:
        check_subject(subject)
        return self.store.subject_state(subject)

    def _visible(self, subject: str, deleted: bool) -> tuple[VersionEntry, ...]:
        """The subject's versions a read sees (soft-deleted ones only with ``deleted``); 40401 if none."""
        state = self._state(subject)
        visible = () if state is None else state.versions if deleted else state.live
        if not visible:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        return visible

    # -- reads -----------------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        """Subjects with a live version (or any version, with ``deleted``), sorted."""
        counts = self.store.subject_live_counts()
        return sorted(s for s, live in counts.items() if (deleted or live > 0) and s.startswith(prefix))

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        return [e.version for e in self._visible(subject, deleted)]

    def get_version(self, subject: str, version: str, deleted: bool = False) -> RegisteredSchema:
        """A version (``latest`` is the newest visible one). 42202 / 40401 / 40402."""
        number = parse_version(version)
        visible = self._visible(subject, deleted)
        entry = visible[-1] if number is None else next((e for e in visible if e.version == number), None)
        if entry is None:
            raise VersionNotFoundError(f"Version {number} not found.")
        text = self._referenced_schema(subject, entry).canonical
        return RegisteredSchema(subject, entry.version, entry.schema_id, text)

    def schema_text(self, schema_id: int) -> str:
        """The schema of an id, soft-deleted versions included (Confluent's semantics). 40403 if none."""
        text = self.store.schema_text(schema_id)
        if text is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return text

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """The (subject, version) pairs that use an id (live ones unless ``deleted``). 40403 if no such id."""
        refs = self.store.references(schema_id)
        if refs is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        if deleted:
            return refs
        out = []
        for subject, version in refs:
            state = self.store.subject_state(subject)
            entry = state.entry(version) if state is not None else None
            if entry is not None and not entry.deleted:
                out.append((subject, version))
        return out

    # -- deletes ---------------------------------------------------------------------------------------

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft (or, after a soft delete, hard) delete every version; return the versions deleted."""
        last: ConcurrentUpdateError | None = None
        for attempt in range(self.max_attempts):
            state = self._state(subject)
            if state is None or not state.versions:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            try:
                if permanent:
                    if state.live:
                        raise SubjectNotSoftDeletedError(
                            f"Subject '{subject}' was not deleted first before being permanently deleted"
                        )
                    versions = [e.version for e in state.versions]
                    self.store.hard_delete(state, versions)
                    self.store.delete_subject_level(subject)
                else:
                    if not state.live:
                        raise SubjectSoftDeletedError(
                            f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
                        )
                    versions = [e.version for e in state.live]
                    self.store.soft_delete(state, versions)
            except ConcurrentUpdateError as exc:
                last = exc
                self._backoff(attempt)
                continue
            return versions
        raise self._gave_up(f"deleting subject {subject!r}", last)

    def delete_version(self, subject: str, version: str, permanent: bool = False) -> int:
        """Soft (or, after a soft delete, hard) delete one version; return its number."""
        number = parse_version(version)
        last: ConcurrentUpdateError | None = None
        for attempt in range(self.max_attempts):
            state = self._state(subject)
            if state is None or not state.versions:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            if number is None:
                candidates = state.versions if permanent else state.live
                entry = candidates[-1] if candidates else None
            else:
                entry = state.entry(number)
            if entry is None:
                raise VersionNotFoundError(f"Version {version.strip()} not found.")
            if permanent and not entry.deleted:
                raise VersionNotSoftDeletedError(
                    f"Subject '{subject}' Version {entry.version} was not deleted first before being "
                    "permanently deleted"
                )
            if not permanent and entry.deleted:
                raise VersionSoftDeletedError(
                    f"Subject '{subject}' Version {entry.version} was soft deleted. "
                    "Set permanent=true to delete permanently"
                )
            try:
                if permanent:
                    self.store.hard_delete(state, [entry.version])
                else:
                    self.store.soft_delete(state, [entry.version])
            except ConcurrentUpdateError as exc:
                last = exc
                self._backoff(attempt)
                continue
            return entry.version
        raise self._gave_up(f"deleting version {version} of subject {subject!r}", last)

    # -- compatibility ---------------------------------------------------------------------------------

    def test_compatibility(
        self,
        subject: str,
        schema_text: str,
        version: str | None,
        schema_type: str | None = None,
        references: Sequence[Any] | None = None,
    ) -> list[str]:
        """Why the schema breaks the subject's level against ``version`` ([] = compatible); registers nothing.

        ``version`` ``latest`` checks what registering would check (nothing to check: compatible); a number
        checks that version only; None checks every live version.
        """
        check_subject(subject)
        schema = self.parse_request_schema(schema_text, schema_type, references)
        number = parse_version(version) if version is not None else None
        state = self.store.subject_state(subject)
        live = state.live if state is not None else ()
        level = self.effective_level(subject)
        if version is None:
            targets: Sequence[VersionEntry] = live
            level = level.as_transitive()
        elif number is None:
            targets = live if level.transitive else live[-1:]
        else:
            if not live:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            entry = next((e for e in live if e.version == number), None)
            if entry is None:
                raise VersionNotFoundError(f"Version {number} not found.")
            targets = [entry]
        previous = [(e.version, self._referenced_schema(subject, e)) for e in targets]
        return check_compatibility(schema, previous, level)

    # -- config ----------------------------------------------------------------------------------------

    def global_level(self) -> CompatibilityLevel:
        stored = self.store.global_level()
        return CompatibilityLevel.parse(stored if stored is not None else self.config.default_compatibility)

    def set_global_level(self, level: str) -> CompatibilityLevel:
        parsed = CompatibilityLevel.parse(level)
        self.store.set_global_level(parsed.value)
        return parsed

    def subject_level(self, subject: str, default_to_global: bool = False) -> CompatibilityLevel:
        """The subject's own level; without one, the global level if asked, else 40408."""
        check_subject(subject)
        stored = self.store.subject_level(subject)
        if stored is not None:
            return CompatibilityLevel.parse(stored)
        if default_to_global:
            return self.global_level()
        raise SubjectConfigNotFoundError(
            f"Subject '{subject}' does not have subject-level compatibility configured"
        )

    def set_subject_level(self, subject: str, level: str) -> CompatibilityLevel:
        check_subject(subject)
        parsed = CompatibilityLevel.parse(level)
        self.store.set_subject_level(subject, parsed.value)
        return parsed

    def delete_subject_level(self, subject: str) -> CompatibilityLevel:
        """Remove the subject's own level (it falls back to the global one); return what it was. 40408."""
        check_subject(subject)
        previous = self.store.delete_subject_level(subject)
        if previous is None:
            raise SubjectConfigNotFoundError(
                f"Subject '{subject}' does not have subject-level compatibility configured"
            )
        return CompatibilityLevel.parse(previous)

    def effective_level(self, subject: str) -> CompatibilityLevel:
        stored = self.store.subject_level(subject)
        return CompatibilityLevel.parse(stored) if stored is not None else self.global_level()
