"""A real schema registry process for tests: ``lumber schemas serve`` on a free 127.0.0.1 port.

Used by the registry's own tests (``tests/schemas/conftest.py``) and by every test that needs a registry
(the load job's). Start with :func:`launch_registry`, stop with :meth:`RegistryProcess.stop` (by pid).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lumber.dev.process import ProcessHandle, free_port, start_and_wait, stop


@dataclass
class RegistryProcess:
    url: str
    port: int
    zk_connect: str
    handle: ProcessHandle
    popen: subprocess.Popen[bytes]
    log_path: Path
    config_path: Path

    def stop(self) -> None:
        stop(self.handle, popen=self.popen)
        # reap it: stop() can see the zombie before Popen does, which leaves Popen.returncode unset
        self.popen.wait(timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def launch_registry(
    zk_connect: str, base_dir: Path, name: str = "registry", extra_toml: str = ""
) -> RegistryProcess:
    port = free_port()
    base_dir.mkdir(parents=True, exist_ok=True)
    config_path = base_dir / f"{name}.toml"
    config_path.write_text(
        f'[zookeeper]\nconnect = "{zk_connect}"\n\n[registry]\nport = {port}\nurl = "http://127.0.0.1:{port}"\n'
        + extra_toml
    )
    url = f"http://127.0.0.1:{port}"
    log_path = base_dir / f"{name}.log"
    argv = [sys.executable, "-m", "lumber", "--config", str(config_path), "schemas", "serve"]
    handle, popen = start_and_wait(name, argv, log_path, lambda: _answers(url), timeout_s=60)
    return RegistryProcess(url, port, zk_connect, handle, popen, log_path, config_path)


def nested_record(depth: int, extra_field: bool = False) -> str:
    """A record nested ``depth`` records deep; ``extra_field``: the innermost one has a field with a
    default more (a compatible change at the bottom)."""
    # R0 is at depth 0, R<k> at depth k, and the innermost field's type at depth ``depth``
    inner: dict[str, Any] = {
        "type": "record",
        "name": f"R{depth - 1}",
        "fields": [{"name": "leaf", "type": "long"}],
    }
    if extra_field:
        inner["fields"].append({"name": "more", "type": "string", "default": ""})
    for level in range(depth - 2, -1, -1):
        inner = {"type": "record", "name": f"R{level}", "fields": [{"name": f"f{level}", "type": inner}]}
    return json.dumps(inner)
