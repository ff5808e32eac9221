"""Fixtures of the audit's tests: one schema registry process (the events are Avro, their schema registered
on first use)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.registry import RegistryProcess, launch_registry
from tests.support.zookeeper import make_chroot


@pytest.fixture(scope="session")
def registry(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryProcess]:
    process = launch_registry(
        make_chroot(zookeeper_server.connect, "audit_registry"), tmp_path_factory.mktemp("registry")
    )
    yield process
    process.stop()
