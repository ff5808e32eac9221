"""Lumber's configuration: one TOML file, ``lumber.toml``.

Where the file comes from (first match wins):

1. the path given with ``lumber --config PATH`` (or :func:`load_config`'s ``path``);
2. the path in the environment variable ``LUMBER_CONFIG``;
3. ``./lumber.toml`` if it exists;
4. no file: every key takes its default.

After the file, environment variables override single keys: ``LUMBER_<SECTION>__<KEY>`` (two underscores
between section and key), e.g. ``LUMBER_ZOOKEEPER__CONNECT=zk1:2181,zk2:2181/lumber`` or
``LUMBER_DEV__ZOOKEEPER_PORT=2182``. The value is read as the key's type (a TOML array for lists).

Layout: one TOML table per section; each section is a frozen dataclass whose fields are the keys. Each
field's ``metadata`` documents it (``doc``) and bounds it (``min``, ``max``, ``choices``). Unknown sections or
keys and values of the wrong type or out of bounds raise :class:`~pipeline.errors.ConfigError`, whose message
names the file (or variable), the key, what was expected and what was found. ``lumber config defaults``
prints every key with its default and documentation.

Sections owned by other packages (the broker's, the registry's) are declared in those packages and composed
here, so that each package can take its own settings without importing the pipeline.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from audit.audit_config import AuditConfig
from broker.client.consumer_config import ConsumerConfig
from broker.client.group_config import GroupConfig
from broker.client.producer_config import ProducerConfig
from broker.config import BrokerConfig, LogConfig
from pipeline.errors import ConfigError
from pipeline.load_config import LoadConfig
from pipeline.schedule_config import ScheduleConfig
from schemas.registry.config import RegistryConfig

ENV_CONFIG_PATH = "LUMBER_CONFIG"
ENV_PREFIX = "LUMBER_"
DEFAULT_FILE_NAME = "lumber.toml"


def setting(default: Any, doc: str, **limits: Any) -> Any:
    """A config key: its default, its documentation and optional ``min``/``max``/``choices`` limits."""
    if isinstance(default, list):
        frozen = list(default)
        return field(default_factory=lambda: list(frozen), metadata={"doc": doc, **limits})
    return field(default=default, metadata={"doc": doc, **limits})


@dataclass(frozen=True)
class ZooKeeperConfig:
    """How every Lumber process reaches ZooKeeper."""

    connect: str = setting(
        "127.0.0.1:2181",
        "ZooKeeper connect string: host:port[,host:port...][/chroot]. Every Lumber znode lives below the "
        "chroot, so several clusters can share one ensemble.",
    )
    session_timeout_ms: int = setting(
        10_000, "ZooKeeper session timeout; ephemeral nodes vanish this long after a process dies.", min=1000
    )
    connect_timeout_ms: int = setting(15_000, "How long to wait for the first connection.", min=100)


@dataclass(frozen=True)
class DevConfig:
    """The local development stack started by ``lumber dev up``."""

    state_dir: str = setting(".lumber", "Folder for the stack's pids, ports, data and logs.")
    zookeeper_port: int = setting(2181, "Port of the stack's ZooKeeper (127.0.0.1 only).", min=1, max=65535)
    zookeeper_heap_mb: int = setting(256, "Java heap of the stack's ZooKeeper.", min=64)
    start_timeout_ms: int = setting(60_000, "How long `dev up` waits for each service to answer.", min=1000)
    registry_port: int = setting(
        8081, "Port of the stack's schema registry (127.0.0.1 only).", min=1, max=65535
    )
    brokers: int = setting(1, "How many brokers `dev up` starts (ids 0 to N-1).", min=0, max=64)
    broker_port: int = setting(
        9092,
        "Port of the stack's first broker; broker i listens on broker_port + i (127.0.0.1).",
        min=1,
        max=65535,
    )


@dataclass(frozen=True)
class ConsoleConfig:
    """The web console, ``lumber console`` (:mod:`pipeline.console`)."""

    host: str = setting(
        "127.0.0.1", "Address the console listens on (127.0.0.1: this machine only; it has no login)."
    )
    port: int = setting(8090, "Port of the console.", min=1, max=65535)
    records_per_page: int = setting(
        50, "Records a topic page shows at most (?limit= may ask for fewer or more, up to 1000).", min=1
    )
    request_timeout_ms: int = setting(
        10_000,
        "How long a page waits for ZooKeeper, the brokers and the registry before it answers 503.",
        min=100,
    )


@dataclass(frozen=True)
class LumberConfig:
    """The whole of ``lumber.toml``: one attribute per section."""

    zookeeper: ZooKeeperConfig = field(default_factory=ZooKeeperConfig)
    dev: DevConfig = field(default_factory=DevConfig)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    log: LogConfig = field(default_factory=LogConfig)
    registry: RegistryConfig = field(default_factory=RegistryConfig)
    producer: ProducerConfig = field(default_factory=ProducerConfig)
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    group: GroupConfig = field(default_factory=GroupConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    source: str = field(default="<defaults>", compare=False, metadata={"internal": True})


SectionT = TypeVar("SectionT")


def _sections() -> dict[str, type[Any]]:
    hints = get_type_hints(LumberConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(LumberConfig) if not f.metadata.get("internal")}


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is list:
        return f"an array of {_describe(get_args(tp)[0])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(tp))
    if tp is type(None):
        return "nothing"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _coerce(tp: Any, value: Any, key: str, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (ints widen to floats)."""
    origin = get_origin(tp)
    ok = False
    if origin is Literal:
        ok = value in get_args(tp)
    elif origin is list:
        if isinstance(value, list):
            (item_tp,) = get_args(tp)
            return [_coerce(item_tp, item, f"{key}[{i}]", where) for i, item in enumerate(value)]
    elif origin in (typing.Union, types.UnionType):
        for option in get_args(tp):
            if option is type(None):
                continue
            try:
                return _coerce(option, value, key, where)
            except ConfigError:
                continue
    elif tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        ok = isinstance(value, str)
    if not ok:
        raise ConfigError(f"{where}: key '{key}' must be {_describe(tp)}, got {value!r}")
    return value


def _check_limits(meta: Mapping[str, Any], value: Any, key: str, where: str) -> None:
    low, high, choices = meta.get("min"), meta.get("max"), meta.get("choices")
    if low is not None and value < low:
        raise ConfigError(f"{where}: key '{key}' must be at least {low}, got {value!r}")
    if high is not None and value > high:
        raise ConfigError(f"{where}: key '{key}' must be at most {high}, got {value!r}")
    if choices is not None and value not in choices:
        raise ConfigError(
            f"{where}: key '{key}' must be one of {', '.join(map(repr, choices))}, got {value!r}"
        )


def build_section(cls: type[SectionT], table: Mapping[str, Any], section: str, where: str) -> SectionT:
    """Build one section dataclass from a TOML table, naming ``section.key`` in every error."""
    hints = get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        qualified = f"{section}.{key}"
        if key not in known:
            raise ConfigError(
                f"{where}: unknown key '{qualified}' (section [{section}] has: {', '.join(sorted(known))})"
            )
        coerced = _coerce(hints[key], value, qualified, where)
        _check_limits(known[key].metadata, coerced, qualified, where)
        kwargs[key] = coerced
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:  # a section's own __post_init__ cross-checks
        raise ConfigError(f"{where}: section [{section}]: {exc}") from exc


def _parse_env_value(tp: Any, raw: str, var: str) -> Any:
    if tp is str or (get_origin(tp) is Literal and all(isinstance(a, str) for a in get_args(tp))):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"environment variable {var}: cannot read {raw!r} as {_describe(tp)}") from exc


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, tuple[Any, str]]]:
    sections = _sections()
    overrides: dict[str, dict[str, tuple[Any, str]]] = {}
    for var, raw in sorted(env.items()):
        if not var.startswith(ENV_PREFIX) or var == ENV_CONFIG_PATH or "__" not in var:
            continue
        section, _, key = var[len(ENV_PREFIX) :].lower().partition("__")
        if section not in sections:
            known = ", ".join(sorted(sections))
            raise ConfigError(f"environment variable {var}: unknown section [{section}] (known: {known})")
        hints = get_type_hints(sections[section])
        if key not in hints:
            raise ConfigError(
                f"environment variable {var}: unknown key '{section}.{key}' "
                f"(section [{section}] has: {', '.join(sorted(hints))})"
            )
        overrides.setdefault(section, {})[key] = (_parse_env_value(hints[key], raw, var), var)
    return overrides


def resolve_config_path(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    """Which file to read: the explicit path, then ``$LUMBER_CONFIG``, then ``./lumber.toml``, else none."""
    if path is not None:
        return Path(path)
    if env.get(ENV_CONFIG_PATH):
        return Path(env[ENV_CONFIG_PATH])
    local = Path(DEFAULT_FILE_NAME)
    return local if local.is_file() else None


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> LumberConfig:
    """Read ``lumber.toml`` (see the module docstring for where from) plus environment overrides."""
    env = os.environ if env is None else env
    file_path = resolve_config_path(path, env)
    document: dict[str, Any] = {}
    where = "<defaults>"
    if file_path is not None:
        where = str(file_path)
        try:
            with file_path.open("rb") as fh:
                document = tomllib.load(fh)
        except FileNotFoundError as exc:
            raise ConfigError(f"{where}: config file not found") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    return config_from_mapping(document, where=where, env=env)


def config_from_mapping(
    document: Mapping[str, Any], where: str = "<mapping>", env: Mapping[str, str] | None = None
) -> LumberConfig:
    """Build a :class:`LumberConfig` from a parsed TOML document, then apply ``env`` overrides."""
    sections = _sections()
    for name, table in document.items():
        if name not in sections:
            raise ConfigError(f"{where}: unknown section [{name}] (known: {', '.join(sorted(sections))})")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [{name}] must be a table, got {table!r}")
    overrides = _env_overrides(env or {})
    built: dict[str, Any] = {}
    for name, cls in sections.items():
        table = dict(document.get(name, {}))
        build_section(cls, table, name, where)  # the file's keys alone, so errors name the file
        for key, (value, var) in overrides.get(name, {}).items():
            build_section(cls, {key: value}, name, f"environment variable {var}")
            table[key] = value
        built[name] = build_section(cls, table, name, where)
    return LumberConfig(**built, source=where)


def render_defaults() -> str:
    """Every section and key with its default value and documentation, as a commented TOML file."""
    lines = ["# lumber.toml: every key with its default. Delete what you do not change.", ""]
    for name, cls in _sections().items():
        lines.append(f"[{name}]")
        if cls.__doc__:
            lines.append(f"# {cls.__doc__.strip().splitlines()[0]}")
        instance = cls()
        for f in dataclasses.fields(cls):
            doc = f.metadata.get("doc", "")
            bounds = [f"{k} {f.metadata[k]}" for k in ("min", "max") if k in f.metadata]
            if "choices" in f.metadata:
                bounds.append("one of " + ", ".join(map(repr, f.metadata["choices"])))
            lines.append(f"# {doc}" + (f" ({'; '.join(bounds)})" if bounds else ""))
            lines.append(f"{f.name} = {_toml_value(getattr(instance, f.name))}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def dump_config(config: LumberConfig) -> str:
    """``config`` as a TOML document that :func:`load_config` reads back to an equal config."""
    lines: list[str] = []
    for name in _sections():
        section = getattr(config, name)
        lines.append(f"[{name}]")
        lines.extend(
            f"{f.name} = {_toml_value(getattr(section, f.name))}" for f in dataclasses.fields(section)
        )
        lines.append("")
    return "\n".join(lines)
