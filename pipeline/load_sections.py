"""The config sections a load run reads, as the load states them: no import of the app's composite config.

``lumber.toml`` is composed by the app (:class:`lumber.config.LumberConfig`), which sits above this library
(issue 18: ``pipeline`` never imports ``lumber``). The load declares what it reads as protocols instead:
:class:`LoadSections` names the sections (``[load]``, ``[zookeeper]``, ``[consumer]``, ``[producer]``,
``[registry]``, ``[audit]``, ``[completeness]``) and their types, and anything with those attributes is
accepted: the app's whole config, or a test's hand-built object. The sections that belong to this package or
below are their own classes (:class:`~pipeline.load_config.LoadConfig`,
:class:`~audit.audit_config.AuditConfig`, the clients' configs); ``[zookeeper]`` and ``[registry]`` are read
through the keys the load uses.
"""

from __future__ import annotations

from typing import Protocol

from audit.audit_config import AuditConfig
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer_config import ProducerConfig
from pipeline.completeness_config import CompletenessConfig
from pipeline.load_config import LoadConfig
from schemas.client import RegistryClientSettings


class ZooKeeperSettings(Protocol):
    """The ``[zookeeper]`` keys the load uses (for its job lock and to find the brokers)."""

    @property
    def connect(self) -> str: ...
    @property
    def session_timeout_ms(self) -> int: ...
    @property
    def connect_timeout_ms(self) -> int: ...


class LoadSections(Protocol):
    """The sections one load run reads (see the module docstring)."""

    @property
    def load(self) -> LoadConfig: ...
    @property
    def zookeeper(self) -> ZooKeeperSettings: ...
    @property
    def consumer(self) -> ConsumerConfig: ...
    @property
    def producer(self) -> ProducerConfig: ...
    @property
    def registry(self) -> RegistryClientSettings: ...
    @property
    def audit(self) -> AuditConfig: ...
    @property
    def completeness(self) -> CompletenessConfig: ...
