"""A broker a conformance scenario runs against: Apache Kafka or Lumber, as a bootstrap address and the
client settings of its listener.

A scenario only talks to ``bootstrap`` with standard clients, each configured from ``security`` (librdkafka's
names: ``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``, ``ssl.ca.location``;
empty for a PLAINTEXT listener): :attr:`Target.client_config` for confluent-kafka, :attr:`Target.kcat_args`
for kcat, :attr:`Target.kafka_python_config` for kafka-python and :meth:`Target.aiokafka_config` for
aiokafka, so one scenario runs over any listener. ``log_dirs`` is for the one thing a client
cannot see: whether the log cleaner has been through a partition yet (both brokers keep Kafka's
``cleaner-offset-checkpoint`` file, version 0: a version line, a count line, then ``topic partition offset``
lines), so a compaction scenario reads a cleaned log, not a lucky one.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumber.dev.process import wait_until

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True)
class Target:
    """One broker under test: ``name`` is ``kafka`` or ``lumber``."""

    name: str
    bootstrap: str
    log_dirs: tuple[Path, ...]
    #: the listener's client settings, librdkafka's names (empty: PLAINTEXT)
    security: Mapping[str, str] = field(default_factory=dict, kw_only=True, hash=False)

    @property
    def client_config(self) -> dict[str, Any]:
        """confluent-kafka's settings for this broker: ``bootstrap.servers`` and the listener's security."""
        return {"bootstrap.servers": self.bootstrap, **self.security}

    @property
    def kcat_args(self) -> list[str]:
        """kcat's ``-b`` and one ``-X`` per security setting (kcat is librdkafka: the same names)."""
        args = ["-b", self.bootstrap]
        for key, value in self.security.items():
            args += ["-X", f"{key}={value}"]
        return args

    @property
    def kafka_python_config(self) -> dict[str, Any]:
        """kafka-python's keyword arguments for this broker (its own names for the same settings)."""
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap}
        if "security.protocol" in self.security:
            config["security_protocol"] = self.security["security.protocol"]
        if "sasl.mechanism" in self.security:
            config |= {
                "sasl_mechanism": self.security["sasl.mechanism"],
                "sasl_plain_username": self.security["sasl.username"],
                "sasl_plain_password": self.security["sasl.password"],
            }
        if "ssl.ca.location" in self.security:
            config["ssl_cafile"] = self.security["ssl.ca.location"]
        return config

    def aiokafka_config(self) -> dict[str, Any]:
        """aiokafka's keyword arguments: kafka-python's names, with TLS as an ``ssl.SSLContext`` (made here,
        trusting ``ssl.ca.location`` alone)."""
        config = self.kafka_python_config
        cafile = config.pop("ssl_cafile", None)
        if cafile is not None:
            config["ssl_context"] = ssl.create_default_context(cafile=cafile)
        return config

    def cleaned_offset(self, topic: str, partition: int) -> int:
        """The partition's first dirty offset as the cleaner last checkpointed it (-1: never cleaned)."""
        for log_dir in self.log_dirs:
            path = log_dir / CLEANER_CHECKPOINT
            if not path.exists():
                continue
            for line in path.read_text().splitlines()[2:]:
                parts = line.split()
                if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition:
                    return int(parts[2])
        return -1

    def wait_cleaned(self, topic: str, partition: int, offset: int, timeout_s: float = 60.0) -> None:
        """Wait until the cleaner has cleaned ``topic-partition`` up to at least ``offset``."""
        wait_until(
            lambda: self.cleaned_offset(topic, partition) >= offset,
            timeout_s,
            f"{self.name}'s cleaner to clean {topic}-{partition} up to offset {offset} "
            f"(now {self.cleaned_offset(topic, partition)})",
            interval_s=0.2,
        )
