"""Real ``lumber schemas serve`` processes: two racing on one store, ZooKeeper going away, shutting down."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from lumber.dev.process import free_port, port_in_use
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.schemas.conftest import RegistryProcess


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Event{i}", "fields": [{"name": "f", "type": "int"}]})


def test_two_server_processes_registering_concurrently(
    zk_connect: str, start_registry: Callable[..., RegistryProcess]
) -> None:
    first = start_registry(zk_connect, "first")
    second = start_registry(zk_connect, "second")
    assert httpx.put(f"{first.url}/config", json={"compatibility": "NONE"}, timeout=30).status_code == 200
    count = 20
    answers: list[list[tuple[int, int]]] = [[], []]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def work(index: int, url: str) -> None:
        try:
            with httpx.Client(base_url=url, timeout=60) as client:
                barrier.wait(timeout=10)
                for i in range(count):
                    for subject in ("shared", f"own-{index}"):
                        response = client.post(f"/subjects/{subject}/versions", json={"schema": schema(i)})
                        assert response.status_code == 200, response.text
                        answers[index].append((i, response.json()["id"]))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, r.url)) for i, r in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert errors == []
    ids_by_schema: dict[int, set[int]] = {}
    for i, schema_id in answers[0] + answers[1]:
        ids_by_schema.setdefault(i, set()).add(schema_id)
    assert all(len(ids) == 1 for ids in ids_by_schema.values())
    assert sorted(next(iter(ids)) for ids in ids_by_schema.values()) == list(range(1, count + 1))
    for i, (schema_id,) in ((i, tuple(ids)) for i, ids in ids_by_schema.items()):
        stored = httpx.get(f"{second.url}/schemas/ids/{schema_id}", timeout=30).json()["schema"]
        assert json.loads(stored)["name"] == f"Event{i}"
    assert httpx.get(f"{first.url}/subjects/shared/versions", timeout=30).json() == list(range(1, count + 1))


def test_store_errors_are_50001_and_the_server_recovers(
    tmp_path: Path, start_registry: Callable[..., RegistryProcess]
) -> None:
    zookeeper = ZooKeeperServer(tmp_path / "zk", free_port())
    zookeeper.start()
    try:
        registry = start_registry(zookeeper.connect)
        assert httpx.post(
            f"{registry.url}/subjects/s/versions", json={"schema": schema(1)}, timeout=30
        ).json() == {"id": 1}
        zookeeper.stop()
        response = httpx.get(f"{registry.url}/subjects/s/versions", timeout=60)
        assert response.status_code == 500
        body = response.json()
        assert body["error_code"] == 50001
        assert body["message"].startswith("ZooKeeper failed during ")
        assert httpx.get(f"{registry.url}/", timeout=30).json() == {}  # the server itself stays up
        zookeeper.start()
        # the session reconnects (ZooKeeper's state is on disk), and the registry answers again
        statuses = []
        for _ in range(100):  # bounded: 100 x (request + 0.2 s)
            answer = httpx.get(f"{registry.url}/subjects/s/versions", timeout=60)
            statuses.append(answer.status_code)
            if answer.status_code == 200:
                break
            time.sleep(0.2)
        assert answer.json() == [1], statuses
    finally:
        zookeeper.stop()


def test_serve_fails_clearly_without_zookeeper(tmp_path: Path) -> None:
    dead_port = free_port()
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "127.0.0.1:{dead_port}"\nconnect_timeout_ms = 1000\n\n'
        f"[registry]\nport = {free_port()}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "schemas", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert (
        f"lumber: error: cannot connect to ZooKeeper at 127.0.0.1:{dead_port} within 1000 ms "
        "(is it running? see [zookeeper] connect)"
    ) in result.stderr


def test_sigterm_stops_the_server_and_frees_its_port(
    zk_connect: str, start_registry: Callable[..., RegistryProcess]
) -> None:
    registry = start_registry(zk_connect)
    registry.stop()
    assert registry.popen.returncode == 0
    assert not port_in_use(registry.port)
    log = registry.log()
    assert "Finished server process" in log
    assert f"schema registry on http://127.0.0.1:{registry.port} stopped" in log
