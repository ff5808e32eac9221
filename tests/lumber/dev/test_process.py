"""lumber/dev/process.py's free ports: below the kernel's ephemeral range, never handed out twice, never one
something is bound to."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import lumber.dev.process as process
from lumber.dev.process import FIRST_FREE_PORT, LOOPBACK, free_port, free_ports, port_in_use


def ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_free_ports_are_below_the_ephemeral_range_and_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(1000)]
    assert len(set(ports)) == 1000
    assert all(FIRST_FREE_PORT <= port < ephemeral_low() for port in ports)


def test_runs_of_consecutive_ports_share_the_never_twice_rule() -> None:
    # a chaos run's stacks: single ports and runs of three (brokers at port, port + 1, port + 2), chosen one
    # after the other with nothing bound meanwhile
    handed = [free_port() for _ in range(400)]
    for _ in range(50):
        first = free_ports(3)
        handed += [first, first + 1, first + 2]
    assert len(set(handed)) == len(handed) == 550
    assert all(FIRST_FREE_PORT <= port < ephemeral_low() for port in handed)
    assert not any(port_in_use(port) for port in handed[:20])


@pytest.fixture
def listening() -> Iterator[int]:
    """A port below the ephemeral range that a socket listens on."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, free_port()))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_something_is_bound_to_is_skipped(listening: int, monkeypatch: pytest.MonkeyPatch) -> None:
    other = free_port()
    process._handed_out.discard(other)  # as if another process had chosen it: it is free to hand out
    picks = iter([listening, other])
    monkeypatch.setattr(random, "randrange", lambda _a, _b: next(picks))
    assert free_port() == other


def test_the_oss_choice_when_the_range_leaves_too_few_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text(f"{FIRST_FREE_PORT + 500}\t60999\n")
    monkeypatch.setattr(process, "EPHEMERAL_RANGE", narrow)
    port = free_port()
    assert port >= ephemeral_low()  # the kernel's own range, as bind() to port 0 gives
    first = free_ports(3)
    assert first >= ephemeral_low()
    assert {first, first + 1, first + 2}.isdisjoint({port})
