"""Lumber's configuration: one TOML file, ``lumber.toml``.

Where the file comes from (first match wins):

1. the path given with ``lumber --config PATH`` (or :func:`load_config`'s ``path``);
2. the path in the environment variable ``LUMBER_CONFIG``;
3. ``./lumber.toml`` if it exists;
4. no file: every key takes its default.

After the file, environment variables override single keys: ``LUMBER_<SECTION>__<KEY>`` (two underscores
between section and key), e.g. ``LUMBER_ZOOKEEPER__CONNECT=zk1:2181,zk2:2181/lumber`` or
``LUMBER_DEV__ZOOKEEPER_PORT=2182``. The value is read as the key's type (a TOML array for lists).

Layout: one TOML table per section; each section is a :class:`~broker.config_section.ConfigSection`, a
frozen pydantic model whose fields are the keys, each documented and bounded where it is declared. Pydantic
checks types (strictly: ``"5"`` is not an integer), bounds, choices and each section's rules over several
keys; this module only finds the file, applies the environment, renames old keys and words the errors. An
unknown section or key, or a value of the wrong type or out of bounds, raises
:class:`~pipeline.errors.ConfigError`, whose message names the file (or variable), the key, what was
expected and what was found. ``lumber config defaults`` prints every key with its default and
documentation.

Renamed keys (:data:`RENAMED_KEYS`): a value several parts need is one key, e.g. ``[audit] topic`` for the
producers, the mirrors and the load; ``[registry] url`` for everything that reaches the registry. The old
keys (``[producer] audit_topic``, ``[load] registry_url``, ``[load] spark_master`` ...) are still read, from
the file and from ``LUMBER_<SECTION>__<KEY>``: each logs a warning naming the old and the new key, and when
both are set the new key wins. The sections that need such a value keep it as a derived attribute
(``config.producer.audit_topic``), which :class:`LumberConfig` fills in from the one key.

Sections owned by other packages (the broker's, the clients', the registry's) are declared in those
packages and composed here, so that each package can take its own settings without importing the app. A
section's module imports only light modules (its package's errors and shared checks), and those packages'
``__init__`` files import nothing, so reading the config loads no client, server or codec: every command pays
for it (``tests/lumber/cli/test_startup.py`` lists what it must not load).
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, get_args, get_origin

from pydantic import Field, SecretStr, ValidationError, model_validator

from audit.audit_config import AuditConfig
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.groups.group_config import GroupConfig
from broker.client.producer.producer_config import ProducerConfig
from broker.cluster.zookeeper_auth import ZooKeeperAuth
from broker.config import BrokerConfig, LogConfig
from broker.config_section import ConfigSection, describe_type, error_phrases, setting
from mirror.mirror_config import MirrorConfig
from pipeline.completeness_config import CompletenessConfig
from pipeline.errors import ConfigError
from pipeline.lag_exporter_config import LagExporterConfig
from pipeline.load_config import LoadConfig
from pipeline.schedule_config import ScheduleConfig
from pipeline.spark_config import SparkConfig
from schemas.registry.config import RegistryConfig

if TYPE_CHECKING:
    from broker.web.web_security import WebSecurity

logger = logging.getLogger(__name__)

ENV_CONFIG_PATH = "LUMBER_CONFIG"
ENV_PREFIX = "LUMBER_"
DEFAULT_FILE_NAME = "lumber.toml"


class ZooKeeperConfig(ConfigSection):
    """How every Lumber process reaches ZooKeeper."""

    connect: str = setting(
        "127.0.0.1:2181",
        "ZooKeeper connect string: host:port[,host:port...][/chroot]. Every Lumber znode lives below the "
        "chroot, so several clusters can share one ensemble.",
    )
    session_timeout_ms: int = setting(
        10_000, "ZooKeeper session timeout; ephemeral nodes vanish this long after a process dies.", ge=1000
    )
    connect_timeout_ms: int = setting(15_000, "How long to wait for the first connection.", ge=100)
    auth_user: str = setting(
        "",
        "A ZooKeeper digest user every Lumber process authenticates as; the znodes it creates get ALL for "
        "that user and READ for the world (/config/users: that user only), as Kafka's "
        "zookeeper.set.acl=true. Empty: no authentication, znodes open. Needs auth_password_file or "
        "auth_password_env.",
    )
    auth_password_file: str = setting(
        "", "A file whose first line is auth_user's password (keep it mode 0600)."
    )
    auth_password_env: str = setting("", "An environment variable holding auth_user's password.")

    @model_validator(mode="after")
    def _check_auth(self) -> Self:
        if ":" in self.auth_user:
            raise ValueError("auth_user must not contain ':'")
        sources = [k for k in ("auth_password_file", "auth_password_env") if getattr(self, k)]
        if len(sources) > 1:
            raise ValueError("give at most one of auth_password_file, auth_password_env")
        if self.auth_user and not sources:
            raise ValueError("auth_user needs auth_password_file or auth_password_env")
        if sources and not self.auth_user:
            raise ValueError(f"{sources[0]} needs auth_user")
        return self

    def auth(self) -> ZooKeeperAuth | None:
        """The digest identity, its password read now from its file or variable; None without auth_user.
        :class:`ConfigError` naming the key and the file or variable (never the value) when it cannot be
        read."""
        if not self.auth_user:
            return None
        try:
            return ZooKeeperAuth.read(self.auth_user, self.auth_password_file, self.auth_password_env)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


class DevConfig(ConfigSection):
    """The local development stack started by ``lumber dev up``."""

    state_dir: str = setting(".lumber", "Folder for the stack's pids, ports, data and logs.")
    zookeeper_port: int = setting(2181, "Port of the stack's ZooKeeper (127.0.0.1 only).", ge=1, le=65535)
    zookeeper_heap_mb: int = setting(256, "Java heap of the stack's ZooKeeper.", ge=64)
    start_timeout_ms: int = setting(60_000, "How long `dev up` waits for each service to answer.", ge=1000)
    registry_port: int = setting(
        8081, "Port of the stack's schema registry (127.0.0.1 only).", ge=1, le=65535
    )
    console_port: int = setting(
        8090, "Port of the stack's web console, `lumber console` (127.0.0.1 only).", ge=1, le=65535
    )
    brokers: int = setting(1, "How many brokers `dev up` starts (ids 0 to N-1).", ge=0, le=64)
    broker_port: int = setting(
        9092,
        "Port of the stack's first broker; broker i listens on broker_port + i (127.0.0.1).",
        ge=1,
        le=65535,
    )
    broker_metrics_port: int = setting(
        9308,
        "Port of the stack's first broker's Prometheus metrics; broker i's is this + i (127.0.0.1; "
        "[broker] metrics_port's default). 0: the stack's brokers serve no metrics.",
        ge=0,
        le=65535,
    )
    lag_exporter_port: int = setting(
        8000,
        "Port of the stack's lag exporter (`lumber groups lag --all-groups --watch --metrics-port`, "
        "127.0.0.1 only; 8000 as Burrow's and kafka-lag-exporter's): its metrics, and the lag history of "
        "ZooKeeper groups that the stack's console shows. Started only with brokers.",
        ge=1,
        le=65535,
    )
    lag_exporter_interval_ms: int = setting(
        5_000, "How often the stack's lag exporter observes every group.", ge=100
    )
    hdfs: bool = setting(
        False,
        "Start HDFS with the stack (`dev up --hdfs`): a NameNode and a DataNode from Hadoop's jars (`make "
        "jars`), and point [load] warehouse_url at hdfs://127.0.0.1:<hdfs_namenode_port>/warehouse and "
        "[load] webhdfs_url at its WebHDFS.",
    )
    hdfs_namenode_port: int = setting(
        8020, "RPC port of the stack's HDFS NameNode (127.0.0.1 only).", ge=1, le=65535
    )
    hdfs_namenode_http_port: int = setting(
        9870, "HTTP port of the stack's NameNode: WebHDFS, JMX, its web UI (127.0.0.1 only).", ge=1, le=65535
    )
    hdfs_datanode_port: int = setting(
        9866, "Data transfer port of the stack's HDFS DataNode (127.0.0.1 only).", ge=1, le=65535
    )
    hdfs_datanode_http_port: int = setting(
        9864, "HTTP port of the stack's DataNode (127.0.0.1 only).", ge=1, le=65535
    )
    hdfs_datanode_ipc_port: int = setting(
        9867, "IPC port of the stack's DataNode (127.0.0.1 only).", ge=1, le=65535
    )
    secure: bool = setting(
        False,
        "Start the brokers with a SASL_SSL listener beside PLAINTEXT (`dev up --secure`): a CA and broker "
        "certificate made for the stack, SCRAM-SHA-512 and -256, and a SCRAM user (secure_user) whose "
        "generated password is kept in <state_dir>/security (mode 0600).",
    )
    broker_sasl_ssl_port: int = setting(
        9192,
        "Port of the stack's first broker's SASL_SSL listener with `secure`; broker i's is this + i.",
        ge=1,
        le=65535,
    )
    secure_user: str = setting("lumber-dev", "The SCRAM user `dev up --secure` makes for clients.")
    hdfs_namenode_heap_mb: int = setting(256, "Java heap of the stack's NameNode.", ge=64)
    hdfs_datanode_heap_mb: int = setting(192, "Java heap of the stack's DataNode.", ge=64)


class ConsoleConfig(ConfigSection):
    """The web console, ``lumber console`` (:mod:`lumber.console`)."""

    host: str = setting(
        "127.0.0.1",
        "Address the console listens on (127.0.0.1: this machine only). Beyond 127.0.0.1 it needs "
        "users_file, or allow_unauthenticated = true.",
    )
    port: int = setting(8090, "Port of the console.", ge=1, le=65535)
    records_per_page: int = setting(
        50, "Records a topic page shows at most (?limit= may ask for fewer or more, up to 1000).", ge=1
    )
    request_timeout_ms: int = setting(
        10_000,
        "How long a page waits for ZooKeeper, the brokers and the registry before it answers 503.",
        ge=100,
    )
    lag_exporter_url: str = setting(
        "",
        "A lag exporter (`lumber groups lag --watch --metrics-port N`: http://127.0.0.1:N) whose windows "
        "give ZooKeeper groups' lag history on their pages (ZooKeeper keeps only the last commit); "
        "empty: no history for ZooKeeper groups.",
    )
    lag_exporter_username: str = setting(
        "", "User the console gives the lag exporter when that asks for one ([lag_exporter] users_file)."
    )
    lag_exporter_password_file: str = setting(
        "", "File whose first line is lag_exporter_username's password (never the password itself here)."
    )
    lag_exporter_cafile: str = setting(
        "", "PEM CA certificates that sign an https lag_exporter_url's certificate (empty: the system's)."
    )
    users_file: str = setting(
        "",
        "A file of name:role:hash lines (`lumber http-users add`): every page needs one of its users "
        "(HTTP Basic); role read sees every page, role admin also resets groups' offsets. Empty: no "
        "authentication, everyone is admin.",
    )
    ssl_certfile: str = setting("", "PEM certificate chain: serve HTTPS (empty: plain HTTP).")
    ssl_keyfile: str = setting("", "PEM private key of ssl_certfile (empty: in ssl_certfile).")
    allow_unauthenticated: bool = setting(
        False, "Serve beyond 127.0.0.1 without users_file (refused otherwise): anyone may reset offsets."
    )

    def security(self) -> WebSecurity:
        """The console's :class:`~broker.web.web_security.WebSecurity`."""
        # the servers' TLS and Basic authentication: imported by the console, not by every config read
        from broker.web.web_security import WebSecurity  # noqa: PLC0415

        return WebSecurity(
            "lumber console",
            "console",
            self.host,
            users_file=self.users_file,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
            allow_unauthenticated=self.allow_unauthenticated,
        )


class LumberConfig(ConfigSection):
    """The whole of ``lumber.toml``: one attribute per section.

    Built in Python (``config.replace(load=...)``) as from a file, the derived keys of every section
    (``producer.audit_topic`` ...) are filled in from the one key they come from (``audit.topic``): set that
    one. Two configs are equal when their sections are (``source`` says where one was read from).
    """

    zookeeper: ZooKeeperConfig = Field(default_factory=ZooKeeperConfig)
    dev: DevConfig = Field(default_factory=DevConfig)
    broker: BrokerConfig = Field(default_factory=BrokerConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    registry: RegistryConfig = Field(default_factory=RegistryConfig)
    producer: ProducerConfig = Field(default_factory=ProducerConfig)
    consumer: ConsumerConfig = Field(default_factory=ConsumerConfig)
    group: GroupConfig = Field(default_factory=GroupConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    completeness: CompletenessConfig = Field(default_factory=CompletenessConfig)
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)
    lag_exporter: LagExporterConfig = Field(default_factory=LagExporterConfig)
    mirror: MirrorConfig = Field(default_factory=MirrorConfig)
    source: str = Field(default="<defaults>", description="Where the config was read from.")

    @model_validator(mode="before")
    @classmethod
    def _fill_derived_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        sections = {name: data[name] if name in data else tp() for name, tp in _sections().items()}
        filled = dict(data)
        for name, section in sections.items():
            if not isinstance(section, ConfigSection):
                continue  # pydantic names the section that is not one
            changes: dict[str, Any] = {}
            for key, source in type(section).derived_keys().items():
                source_section, _, source_key = source.partition(".")
                value = getattr(sections[source_section], source_key)
                if getattr(section, key) != value:
                    changes[key] = value
            if changes:
                filled[name] = section.replace(**changes)
        return filled

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LumberConfig):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _sections())

    __hash__ = None  # type: ignore[assignment]


def _sections() -> dict[str, type[ConfigSection]]:
    """``{section name: section class}``, in file order."""
    return {
        name: info.annotation
        for name, info in LumberConfig.model_fields.items()
        if isinstance(info.annotation, type) and issubclass(info.annotation, ConfigSection)
    }


#: old ``section.key`` -> the one key it is now. Still read, from the file and the environment, with a
#: warning naming both; the new key wins if both are set. A section that keeps the value as an attribute
#: declares it as a derived key of the old name (``setting(..., derived="audit.topic")``), which
#: :class:`LumberConfig` fills in; a key whose attribute is gone is still renamed here.
RENAMED_KEYS: dict[str, str] = {
    "producer.audit_window_ms": "audit.window_ms",
    "producer.audit_topic": "audit.topic",
    "producer.audit_topic_partitions": "audit.topic_partitions",
    "producer.audit_registry_url": "registry.url",
    "load.window_ms": "audit.window_ms",
    "load.registry_url": "registry.url",
    "load.spark_master": "spark.master",
    "load.spark_submit": "spark.submit",
    "load.spark_conf": "spark.conf",
    "load.python": "spark.python",
}


def renamed_keys() -> dict[str, str]:
    """:data:`RENAMED_KEYS`."""
    return RENAMED_KEYS


def _apply_renames(document: dict[str, dict[str, Any]], where: str) -> None:
    """Move each old key of ``document`` to its new key (in place), warning about each."""
    audit = document.get("audit", {})
    if audit.get("window_ms") == 0 and "report_window_ms" not in audit:
        # the old [audit] window_ms was the report's width, 0 for "the loads' interval" (its default, so
        # in every saved `lumber config defaults`); no counting window is 0 wide, so this is the old key
        audit["report_window_ms"] = audit.pop("window_ms")
        logger.warning(
            "%s: [audit] window_ms = 0 is read as [audit] report_window_ms = 0 (the width `audit verify` "
            "reports in is now report_window_ms; window_ms is the counting window of every tier)",
            where,
        )
    moved: dict[str, str] = {}
    for old, new in renamed_keys().items():
        old_section, _, old_key = old.partition(".")
        if old_key not in document.get(old_section, {}):
            continue
        value = document[old_section].pop(old_key)
        new_section, _, new_key = new.partition(".")
        target = document.setdefault(new_section, {})
        old_name, new_name = f"[{old_section}] {old_key}", f"[{new_section}] {new_key}"
        if value == "":
            logger.warning("%s: %s is deprecated and ignored when empty; set %s", where, old_name, new_name)
        elif new_key in target and target[new_key] != value:
            logger.warning(
                "%s: %s is deprecated, use %s; both are set, so %s = %r is used and %s = %r ignored",
                where,
                old_name,
                new_name,
                moved.get(new, new_name),
                target[new_key],
                old_name,
                value,
            )
        else:
            logger.warning(
                "%s: %s is deprecated, use %s (read as %s = %r)", where, old_name, new_name, new_name, value
            )
            target.setdefault(new_key, value)
            moved.setdefault(new, old_name)


def _check_section(
    cls: type[ConfigSection], table: Mapping[str, Any], section: str, where: str
) -> ConfigSection:
    """Build one section from a TOML table with pydantic, naming ``where`` and ``section.key`` in errors."""
    derived = sorted(set(table) - set(cls.file_keys()) & set(cls.model_fields))
    if derived:  # filled in from its one key (``[audit] topic`` ...), never read from the section itself
        known = ", ".join(sorted(cls.documented_keys()))
        raise ConfigError(f"{where}: unknown key '{section}.{derived[0]}' (section [{section}] has: {known})")
    try:
        return cls.from_table(table)
    except ValidationError as exc:
        messages: list[str] = []
        for phrase in error_phrases(exc, cls):
            if phrase.unknown_key:
                known = ", ".join(sorted(cls.documented_keys()))
                messages.append(f"unknown key '{section}.{phrase.key}' (section [{section}] has: {known})")
            elif phrase.key:
                messages.append(f"key '{section}.{phrase.key}' {phrase.text}")
            else:
                messages.append(f"section [{section}]: {phrase.text}")
        raise ConfigError(f"{where}: " + "; ".join(messages)) from exc


def _parse_env_value(tp: Any, raw: str, var: str) -> Any:
    if (
        tp is str
        or tp is SecretStr
        or (get_origin(tp) is Literal and all(isinstance(a, str) for a in get_args(tp)))
    ):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"environment variable {var}: cannot read {raw!r} as {describe_type(tp)}") from exc


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
        renamed = renamed_keys().get(f"{section}.{key}")
        new_section, _, new_key = (renamed or f"{section}.{key}").partition(".")
        fields = sections[new_section].file_keys()
        if new_key not in fields:
            raise ConfigError(
                f"environment variable {var}: unknown key '{section}.{key}' "
                f"(section [{section}] has: {', '.join(sorted(sections[section].documented_keys()))})"
            )
        value = _parse_env_value(fields[new_key].annotation, raw, var)
        if renamed is not None:
            table = {section: {key: value}}
            _apply_renames(table, f"environment variable {var}")
            if value == "":
                continue
            section, _, key = renamed.partition(".")
            if key in overrides.get(section, {}):
                continue  # the new key's own variable wins
        overrides.setdefault(section, {})[key] = (value, var)
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
    tables: dict[str, dict[str, Any]] = {}
    for name, table in document.items():
        if name not in sections:
            raise ConfigError(f"{where}: unknown section [{name}] (known: {', '.join(sorted(sections))})")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [{name}] must be a table, got {table!r}")
        tables[name] = dict(table)
    _apply_renames(tables, where)
    overrides = _env_overrides(env or {})
    built: dict[str, Any] = {}
    for name, cls in sections.items():
        table = tables.get(name, {})
        section = _check_section(cls, table, name, where)  # the file's keys alone, so errors name the file
        for key, (value, var) in overrides.get(name, {}).items():
            table[key] = value
            section = _check_section(cls, table, name, f"environment variable {var}")
        built[name] = section
    return LumberConfig(**built, source=where)


def _bounds(info: Any) -> list[str]:
    found: list[str] = []
    for item in info.metadata:
        if getattr(item, "ge", None) is not None:
            found.append(f"min {item.ge}")
        if getattr(item, "le", None) is not None:
            found.append(f"max {item.le}")
    if get_origin(info.annotation) is Literal:
        found.append("one of " + ", ".join(map(repr, get_args(info.annotation))))
    return found


def render_defaults() -> str:
    """Every section and key with its default value and documentation, as a commented TOML file."""
    lines = ["# lumber.toml: every key with its default. Delete what you do not change.", ""]
    for name, cls in _sections().items():
        lines.append(f"[{name}]")
        if cls.__doc__:
            lines.append(f"# {cls.__doc__.strip().splitlines()[0]}")
        instance = cls()
        for key, info in cls.documented_keys().items():
            bounds = _bounds(info)
            lines.append(f"# {info.description or ''}" + (f" ({'; '.join(bounds)})" if bounds else ""))
            lines.append(f"{key} = {_toml_value(getattr(instance, key))}")
        lines.append("")
    lines.append(
        "# Renamed keys: still read, with a warning naming the new key (the new key wins if both are set)."
    )
    lines.extend(f"#   {_key_name(old)} -> {_key_name(new)}" for old, new in renamed_keys().items())
    lines.append("")
    return "\n".join(lines)


def _key_name(qualified: str) -> str:
    """``section.key`` as the file shows it: ``[section] key``."""
    section, _, key = qualified.partition(".")
    return f"[{section}] {key}"


#: What ``lumber config show`` prints for a secret that is set.
MASK = "********"


def _toml_value(value: Any, *, reveal: bool = True) -> str:
    if isinstance(value, SecretStr):
        secret = value.get_secret_value()
        return _toml_value(secret if reveal or not secret else MASK)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_value(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def dump_config(config: LumberConfig, *, mask_secrets: bool = False) -> str:
    """``config`` as a TOML document that :func:`load_config` reads back to an equal config; with
    ``mask_secrets`` (``lumber config show``) every secret that is set reads ``"********"`` instead.

    Unmasked, the text holds the secrets given in the file: write it only to a file of mode 0600
    (:func:`write_private`)."""
    lines: list[str] = []
    for name, cls in _sections().items():
        section = getattr(config, name)
        lines.append(f"[{name}]")
        lines.extend(
            f"{key} = {_toml_value(getattr(section, key), reveal=not mask_secrets)}"
            for key in cls.file_keys()
        )
        lines.append("")
    return "\n".join(lines)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (a config that may hold secrets): created 0600
    through a temporary beside it and renamed over it, so it is never wider for a moment nor torn."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    tmp.replace(path)
