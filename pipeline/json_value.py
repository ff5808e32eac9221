"""One JSON (de)serialisation for the load's value types: pydantic v2 over the frozen dataclasses.

The load writes small JSON files and messages: the manifest (:mod:`pipeline.manifest`), the run record
(:mod:`pipeline.run_record`), the plan (:mod:`pipeline.load_plan`) with its offset ranges
(:mod:`pipeline.ranges`) and read tasks (:mod:`pipeline.source`), and each task's summary
(:mod:`pipeline.task_output`). Each of those types is a frozen dataclass that also derives from
:class:`JsonValue`; its JSON is what pydantic's ``TypeAdapter`` makes of the dataclass's fields (in lax mode,
so ``"3"`` reads as ``3`` the way ``int(...)`` did), plus three house rules that keep the files already on
disk readable:

* a field declared in ``JSON_FLATTEN`` (a dataclass such as ``range: OffsetRange``) is written with its
  keys in the outer object, in its place (``{"task": 0, "topic": ..., "partition": ..., "rows": ...}``) and
  read back from them;
* ``JSON_FORMAT`` (when not ``None``) is written first as ``"format"`` and checked on reading;
* ``Offsets`` (a mapping of :class:`~broker.record.topic_partition.TopicPartition` to an offset) is written as
  ``{"<topic>": {"<partition>": offset}}``, sorted.

A value that does not fit raises :class:`~pipeline.load_errors.MalformedJsonError` naming the file
(``where``), what it should be, and each offending field by its path with what was found
(``files.0.bytes: Input should be a valid integer (found 'x')``).

Why pydantic: it is already installed (through FastAPI, and the config sections use it), validates and
converts in compiled code, and works on the dataclasses as they are: the types stay plain frozen dataclasses
that pickle to Spark executors. The adapters are built once per class, on first use; they are thread-safe.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    GetCoreSchemaHandler,
    GetPydanticSchema,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import core_schema

from broker.record.topic_partition import TopicPartition
from pipeline.load_errors import MalformedJsonError


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{topic: {partition: offset}}``, topics and partitions in order."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def _offsets_from_json(nested: dict[str, dict[int, int]]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, partition): offset
        for topic, partitions in nested.items()
        for partition, offset in partitions.items()
    }


def _offsets_schema(_source: Any, _handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
    nested = core_schema.dict_schema(
        core_schema.str_schema(), core_schema.dict_schema(core_schema.int_schema(), core_schema.int_schema())
    )
    return core_schema.no_info_after_validator_function(
        _offsets_from_json,
        nested,
        serialization=core_schema.plain_serializer_function_ser_schema(offsets_to_json),
    )


#: Offsets per topic-partition, as JSON ``{"<topic>": {"<partition>": offset}}``.
Offsets = Annotated[Mapping[TopicPartition, int], GetPydanticSchema(_offsets_schema)]


class JsonValue:
    """Mixin of a frozen dataclass that is written as JSON (see the module docstring)."""

    __slots__ = ()

    #: What the JSON is, for error messages ("manifest").
    JSON_WHAT: ClassVar[str] = "value"
    #: Written first as ``"format"`` and checked on reading; ``None``: no format key.
    JSON_FORMAT: ClassVar[int | None] = None
    #: Dataclass-typed fields whose keys are written in the outer object.
    JSON_FLATTEN: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _json_adapter(cls) -> TypeAdapter[Self]:
        return _adapter(cls)

    def to_json(self) -> dict[str, Any]:
        """This value as a JSON object (plain dicts, lists, strings and numbers)."""
        out: dict[str, Any] = self._json_adapter().dump_python(self, mode="json")
        return out

    @classmethod
    def from_json(cls, value: Any, where: str = "<json>") -> Self:
        """The value ``value`` (a parsed JSON object) describes; ``where`` names its file in errors."""
        if cls.JSON_FORMAT is not None and isinstance(value, Mapping):
            found = value.get("format")
            if found != cls.JSON_FORMAT:
                raise MalformedJsonError(
                    f"{where}: not a valid {cls.JSON_WHAT}: format {found!r}, expected {cls.JSON_FORMAT}"
                )
        try:
            return cls._json_adapter().validate_python(value)
        except ValidationError as exc:
            raise MalformedJsonError(_describe(exc, cls.JSON_WHAT, where)) from exc
        except ValueError as exc:  # raised by a dataclass's own __post_init__
            raise MalformedJsonError(f"{where}: not a valid {cls.JSON_WHAT}: {exc}") from exc

    def dumps(self, *, indent: int | None = 1) -> str:
        """The JSON text: indented (a file, one line per value) or compact (``indent=None``, a message)."""
        if indent is None:
            return json.dumps(self.to_json(), separators=(",", ":"))
        return json.dumps(self.to_json(), indent=indent) + "\n"

    @classmethod
    def loads(cls, text: str | bytes, where: str) -> Self:
        """Parse ``text`` (the contents of ``where``)."""
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise MalformedJsonError(f"{where}: not a valid {cls.JSON_WHAT}: not JSON: {exc}") from exc
        return cls.from_json(value, where)

    @model_validator(mode="before")
    @classmethod
    def _json_before(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        if cls.JSON_FORMAT is not None:  # checked by from_json
            value = {k: v for k, v in value.items() if k != "format"}
        for name, keys in _flattened(cls):
            if name not in value:
                inner = {k: value[k] for k in keys if k in value}
                value = {**{k: v for k, v in value.items() if k not in keys}, name: inner}
        return value

    @model_serializer(mode="wrap")
    def _json_after(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        flattened = {name for name, _ in _flattened(type(self))}
        result: dict[str, Any] = {} if self.JSON_FORMAT is None else {"format": self.JSON_FORMAT}
        for key, item in out.items():
            if key in flattened:
                result.update(item)
            else:
                result[key] = item
        return result


#: Built once per class (a race builds one twice, harmlessly: dict assignment is atomic).
_ADAPTERS: dict[type[JsonValue], TypeAdapter[Any]] = {}
_FLATTENED: dict[type[JsonValue], tuple[tuple[str, tuple[str, ...]], ...]] = {}


def _adapter(cls: type[JsonValue]) -> TypeAdapter[Any]:
    found = _ADAPTERS.get(cls)
    if found is None:
        found = _ADAPTERS[cls] = TypeAdapter(cls)
    return found


def _flattened(cls: type[JsonValue]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(field, keys of its dataclass)`` for each field of ``cls.JSON_FLATTEN``."""
    found = _FLATTENED.get(cls)
    if found is None:
        found = _FLATTENED[cls] = _find_flattened(cls)
    return found


def _find_flattened(cls: type[JsonValue]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for name in cls.JSON_FLATTEN:
        inner = hints[name]
        if not dataclasses.is_dataclass(inner):
            raise TypeError(f"{cls.__name__}.{name}: only a dataclass field can be flattened, not {inner!r}")
        out.append((name, tuple(f.name for f in dataclasses.fields(inner))))
    return tuple(out)


def _describe(exc: ValidationError, what: str, where: str) -> str:
    problems = []
    for error in exc.errors(include_url=False)[:5]:
        path = ".".join(str(part) for part in error["loc"]) or "(top level)"
        found = error.get("input")
        shown = "" if error["type"] == "missing" else f" (found {_short(found)})"
        problems.append(f"{path}: {error['msg']}{shown}")
    more = exc.error_count() - len(problems)
    tail = f"; and {more} more" if more > 0 else ""
    return f"{where}: not a valid {what}: " + "; ".join(problems) + tail


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
