"""One style for every section of ``lumber.toml``: a frozen pydantic model whose fields are the keys.

Every section (``[log]`` and ``[broker]`` here, ``[producer]``, ``[consumer]``, ``[group]``, the mirror's,
``[registry]``, ``[load]``, ``[spark]``, ``[schedule]``, ``[audit]``, and the app's own) subclasses
:class:`ConfigSection` and declares each key with :func:`setting`: its default, its documentation
(``description``) and its bounds (``ge``/``le``; choices are ``Literal`` types). Pydantic does all the
checking, in strict mode so that a TOML ``"5"`` is not an integer and ``true`` is not 1; cross-key rules are
``model_validator(mode="after")`` methods raising :class:`ValueError` with a message naming the keys.

The same validation runs for a section read from a file (the loader, :mod:`lumber.config`, calls
:meth:`ConfigSection.from_table` and turns :func:`error_phrases` into messages naming the file or variable
and ``section.key``) and for a section built in Python (``ProducerConfig(linger_ms=-1)``), which
raises the section's :attr:`ConfigSection.error_type` with ``ProducerConfig.linger_ms must be at least 0, got
-1``. Sections are immutable; :meth:`ConfigSection.replace` returns a validated copy with some keys changed.
Schemas are built on first use (``defer_build``), so a process pays only for the sections it builds.

A key whose value another section owns (``[producer] audit_topic`` is ``[audit] topic``) is declared with
``setting(..., derived="audit.topic")``: it is not a key of the file (the loader renames it, with a
warning), ``lumber config defaults`` does not list it, and the composite config fills it in.

A secret (a SASL or key password) is a :class:`pydantic.SecretStr` key: its ``repr`` is stars, the loader's
errors never quote its value, and ``lumber config show`` masks it (:mod:`lumber.config`).

This module must import nothing of Lumber's: every package's config imports it.
"""

from __future__ import annotations

import logging
import types
import typing
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_core import ErrorDetails

logger = logging.getLogger(__name__)

#: set while :meth:`ConfigSection.from_table` validates: errors stay pydantic's, for the loader to word
_FROM_TABLE: ContextVar[bool] = ContextVar("lumber_config_from_table", default=False)

#: the ``json_schema_extra`` key that marks a derived key (its value: the ``section.key`` it comes from)
DERIVED = "derived_from"
#: the ``json_schema_extra`` key that marks a key ``lumber config defaults`` leaves out (a test hook)
HIDDEN = "hidden"


def setting(
    default: Any,
    doc: str,
    *,
    ge: int | None = None,
    le: int | None = None,
    derived: str | None = None,
    hidden: bool = False,
) -> Any:
    """A config key: its default, its documentation, optional bounds, where a derived key comes from, and
    whether it is a hidden key (a test hook: read like any key, never listed)."""
    extra: dict[str, Any] | None = {DERIVED: derived} if derived else ({HIDDEN: True} if hidden else None)
    if isinstance(default, list):
        frozen = tuple(default)
        return Field(
            default_factory=lambda: list(frozen), description=doc, ge=ge, le=le, json_schema_extra=extra
        )
    return Field(default, description=doc, ge=ge, le=le, json_schema_extra=extra)


def renamed_choice(value: object, renames: Mapping[str, str], key: str) -> object:
    """``value``, or its new name when it is an old name in ``renames`` (with a warning naming both)."""
    if isinstance(value, str) and value in renames:
        new = renames[value]
        logger.warning("%s: %r is deprecated, use %r (read as %r)", key, value, new, new)
        return new
    return value


class ConfigSection(BaseModel):
    """Base of every config section: frozen, unknown keys refused, strict types, every key documented."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    #: what a section built in Python with bad values raises (a :class:`ValueError`); the loader raises
    #: its own error naming the file instead
    error_type: ClassVar[type[ValueError]] = ValueError

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            if _FROM_TABLE.get():
                raise
            name = type(self).__name__
            raise self.error_type(
                "; ".join(
                    f"{name}.{phrase.key} {phrase.text}" if phrase.key else phrase.text
                    for phrase in error_phrases(exc, type(self))
                )
            ) from exc

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Self:
        """The section of a TOML table; a bad table raises pydantic's :class:`ValidationError` (see
        :func:`error_phrases`), which the loader words with the file and key."""
        token = _FROM_TABLE.set(True)
        try:
            return cls.model_validate(dict(table))
        finally:
            _FROM_TABLE.reset(token)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, validated as a new section (a model's ``dataclasses.replace``)."""
        return type(self)(**{**self.__dict__, **changes})

    @classmethod
    def file_keys(cls) -> dict[str, Any]:
        """The section's file keys (derived keys left out) with their pydantic field info."""
        return {
            name: info
            for name, info in cls._fields_in_order().items()
            if not (isinstance(info.json_schema_extra, dict) and DERIVED in info.json_schema_extra)
        }

    @classmethod
    def _fields_in_order(cls) -> dict[str, Any]:
        """The fields, the section's own first, then each base section's (pydantic lists a base's first):
        a section split over base classes by concern still reads from its main keys."""
        fields = cls.model_fields
        order = [
            name for klass in cls.__mro__ for name in vars(klass).get("__annotations__", {}) if name in fields
        ]
        return {name: fields[name] for name in dict.fromkeys([*order, *fields])}

    @classmethod
    def documented_keys(cls) -> dict[str, Any]:
        """The keys ``lumber config defaults`` lists: the file keys but the hidden ones."""
        return {
            name: info
            for name, info in cls.file_keys().items()
            if not (isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get(HIDDEN))
        }

    @classmethod
    def derived_keys(cls) -> dict[str, str]:
        """``{key: "section.key"}`` of the derived keys."""
        found: dict[str, str] = {}
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra
            if isinstance(extra, dict) and DERIVED in extra:
                found[name] = str(extra[DERIVED])
        return found


def codec_level(section: ConfigSection, codec: str) -> int | None:
    """``section``'s ``compression_<codec>_level`` key, the level ``codec`` compresses with (None: a codec
    without levels, or ``producer``); one reading for the broker's ``[log]`` and the ``[producer]``."""
    return getattr(section, f"compression_{codec}_level", None) if codec in ("gzip", "lz4", "zstd") else None


def describe_type(tp: Any) -> str:
    """An annotation in words: ``an integer``, ``one of 'a', 'b'``, ``an array of a string``."""
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is list:
        return f"an array of {describe_type(get_args(tp)[0])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in get_args(tp))
    if tp is type(None):
        return "nothing"
    words = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "true or false",
        SecretStr: "a string",
    }
    return words.get(tp, str(tp))


class _Hidden:
    def __repr__(self) -> str:
        return "a value not shown (a secret)"


_HIDDEN_VALUE = _Hidden()


def _is_secret(field: Any) -> bool:
    """Whether a field holds a secret (a :class:`SecretStr`: never shown in errors or ``config show``)."""
    return field is not None and field.annotation is SecretStr


_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "float_type": "a number",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
}


@dataclass(frozen=True)
class ErrorPhrase:
    """One validation error in words: the key (``""`` for a rule over several keys) and what is wrong."""

    key: str
    text: str
    unknown_key: bool = False


def error_phrases(exc: ValidationError, section: type[ConfigSection]) -> list[ErrorPhrase]:
    """``exc``'s errors as phrases: ``must be at least 1, got 0``, ``must be one of 'a', 'b', got 'c'``."""
    return [_phrase(error, section) for error in exc.errors()]


def _phrase(error: ErrorDetails, section: type[ConfigSection]) -> ErrorPhrase:
    loc = error["loc"]
    key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    kind = error["type"]
    ctx = error.get("ctx", {})
    found = error.get("input")
    secret = len(loc) >= 1 and _is_secret(section.model_fields.get(str(loc[0])))
    if secret:  # a secret's value is never quoted, even a wrong one
        found = _HIDDEN_VALUE
    if kind == "extra_forbidden":
        return ErrorPhrase(key, "is not a key of the section", unknown_key=True)
    if kind in ("value_error", "assertion_error"):
        cause = ctx.get("error")
        return ErrorPhrase("", str(cause) if cause is not None else error["msg"])
    if kind in ("greater_than_equal", "greater_than"):
        return ErrorPhrase(key, f"must be at least {ctx.get('ge', ctx.get('gt'))}, got {found!r}")
    if kind in ("less_than_equal", "less_than"):
        return ErrorPhrase(key, f"must be at most {ctx.get('le', ctx.get('lt'))}, got {found!r}")
    field = section.model_fields.get(str(loc[0])) if len(loc) == 1 else None
    if field is not None and kind in (*_TYPE_WORDS, "literal_error"):
        return ErrorPhrase(key, f"must be {describe_type(field.annotation)}, got {found!r}")
    if kind == "literal_error":
        return ErrorPhrase(key, f"must be {ctx.get('expected')}, got {found!r}")
    if kind in _TYPE_WORDS:
        return ErrorPhrase(key, f"must be {_TYPE_WORDS[kind]}, got {found!r}")
    return ErrorPhrase(key, f"{error['msg'][:1].lower()}{error['msg'][1:]}, got {found!r}")
