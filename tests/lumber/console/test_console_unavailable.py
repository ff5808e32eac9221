"""The console when its sources are not there: ZooKeeper or the registry not answering is a 503 page naming
them, and so is a warehouse on a NameNode that does not answer; never a 500 (the application in-process,
real closed ports)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from lumber.config import config_from_mapping
from lumber.console.app import create_app
from lumber.dev.process import free_port


@pytest.fixture
def client() -> TestClient:
    dead = free_port()  # nothing listens there
    config = config_from_mapping(
        {
            "zookeeper": {"connect": f"127.0.0.1:{dead}"},
            "registry": {"url": f"http://127.0.0.1:{dead}"},
            "load": {"warehouse_url": f"hdfs://127.0.0.1:{dead}/warehouse"},
            "console": {"request_timeout_ms": 500},
        },
        where="test",
    )
    return TestClient(create_app(config))


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/", 503, "ZooKeeper 127.0.0.1:{port} does not answer"),
        ("/groups", 503, "ZooKeeper 127.0.0.1:{port} does not answer"),
        ("/topics/events", 503, "ZooKeeper 127.0.0.1:{port} does not answer"),
        ("/schemas", 503, "http://127.0.0.1:{port}"),
        ("/loads", 503, "the warehouse hdfs://127.0.0.1:{port}/warehouse cannot be read: stat hdfs://"),
    ],
)
def test_missing_sources_are_named(client: TestClient, path: str, status: int, message: str) -> None:
    port = client.app.state.config.zookeeper.connect.rsplit(":", 1)[1]  # type: ignore[attr-defined]
    answer = client.get(path, params={"format": "json"})
    assert answer.status_code == status, answer.text
    assert message.format(port=port) in answer.json()["message"]
    page = client.get(path)
    assert page.status_code == status
    assert page.headers["content-type"].startswith("text/html")
