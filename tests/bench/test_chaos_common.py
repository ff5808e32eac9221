"""bench/chaos_common.py's port choice: a chaos run chooses its stacks' ports before their servers bind
them, so no port may be handed out twice."""

from __future__ import annotations

from bench.chaos_common import free_ports
from lumber.dev.process import port_in_use


def test_free_ports_never_hands_out_a_port_twice() -> None:
    # 400 single ports and 50 runs of three, chosen one after the other with nothing bound meanwhile: the OS
    # offers a port again as soon as the probe's socket is closed
    handed: list[int] = [free_ports(1) for _ in range(400)]
    for _ in range(50):
        first = free_ports(3)
        handed += [first, first + 1, first + 2]
    assert len(set(handed)) == len(handed) == 550
    assert not any(port_in_use(port) for port in handed[:20])
