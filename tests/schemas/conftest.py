"""Fixtures for the schema registry tests: real registry server processes on real ZooKeeper.

* ``start_registry(zk_connect, ...)``: start ``lumber schemas serve`` (a real process, free 127.0.0.1 port,
  its own ``lumber.toml``) and wait until it answers; stopped (by pid) at the end of the test.
* ``registry``: one server on the test's own ZooKeeper chroot (``zk_connect``).
* ``shared_registry``: one server per test module, on a chroot of its own; tests use unique subjects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.registry import RegistryProcess, launch_registry
from tests.support.zookeeper import make_chroot

__all__ = ["RegistryProcess"]  # the tests import it from here

T = TypeVar("T")


@pytest.fixture
def start_registry(tmp_path: Path) -> Iterator[Callable[..., RegistryProcess]]:
    started: list[RegistryProcess] = []

    def start(zk_connect: str, name: str = "registry", extra_toml: str = "") -> RegistryProcess:
        process = launch_registry(zk_connect, tmp_path / "registries", name, extra_toml)
        started.append(process)
        return process

    yield start
    for process in reversed(started):
        process.stop()


@pytest.fixture
def registry(zk_connect: str, start_registry: Callable[..., RegistryProcess]) -> RegistryProcess:
    return start_registry(zk_connect)


@pytest.fixture(scope="module")
def shared_registry(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryProcess]:
    connect = make_chroot(zookeeper_server.connect, f"shared_registry_{uuid.uuid4().hex[:6]}")
    process = launch_registry(connect, tmp_path_factory.mktemp("shared-registry"))
    yield process
    process.stop()


@pytest.fixture
def subject() -> str:
    """A subject name unique to the test (tests on ``shared_registry`` must not see each other's)."""
    return f"test-{uuid.uuid4().hex[:10]}-value"


@pytest.fixture
def closing() -> Iterator[Callable[[T], T]]:
    """``closing(obj)`` returns ``obj`` and closes it at the end of the test (clients, serdes)."""
    opened: list[Any] = []

    def track(obj: T) -> T:
        opened.append(obj)
        return obj

    yield track
    for obj in reversed(opened):
        obj.close()
