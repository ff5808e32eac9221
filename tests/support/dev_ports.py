"""Free ports for a ``lumber dev up`` under test: every ``[dev] *_port`` key as a ``LUMBER_DEV__`` variable.

Tests run in parallel (pytest-xdist), so no stack under test may keep a default port: two stacks on
Lumber's defaults (9092, 9308 + id, ...) would take each other's ports. The keys come from
:class:`lumber.config.DevConfig` itself, so a port added to ``[dev]`` is covered here at once. The
``broker_*`` ports are blocks, broker i's being the key's port + i: a whole block is free when chosen.
"""

from __future__ import annotations

from lumber.config import DevConfig
from lumber.dev.process import free_port, port_in_use

#: the brokers a block leaves room for (the most any stack under test starts)
MAX_BROKERS = 3


def dev_port_env(brokers: int = MAX_BROKERS) -> dict[str, str]:
    """``LUMBER_DEV__<KEY>`` -> a free port for every ``[dev] <key>`` ending in ``_port``; for the
    ``broker_*`` keys the first of ``brokers`` consecutive free ports."""
    taken: set[int] = set()
    env: dict[str, str] = {}
    for key in DevConfig.model_fields:
        if not key.endswith("_port"):
            continue
        width = brokers if key.startswith("broker_") else 1
        port = _free_block(width, taken)
        taken.update(range(port, port + width))
        env[f"LUMBER_DEV__{key.upper()}"] = str(port)
    return env


def _free_block(width: int, taken: set[int]) -> int:
    for _ in range(200):
        port = free_port()
        block = range(port, port + width)
        if block[-1] > 65535 or taken.intersection(block):
            continue
        if not any(port_in_use(p) for p in block[1:]):
            return port
    raise AssertionError(f"no {width} consecutive free ports on 127.0.0.1 in 200 tries")
