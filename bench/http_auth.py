"""What HTTP Basic authentication and TLS cost the HTTP servers' requests (issue 37, "Console and metrics").

Run from the repository root::

    .venv/bin/python bench/http_auth.py               # --requests 300 --rounds 5
    .venv/bin/python bench/http_auth.py --quick       # smoke run: 50 requests, 1 round

A lag exporter (:mod:`pipeline.lag_exporter`, served by :class:`broker.web.wsgi_server.WsgiServer` as the
brokers' metrics are) holding one group's lag, in this process, on 127.0.0.1, three ways: plain HTTP without
users, HTTP with a users file (every request sends a user's Basic credentials), HTTPS with the same users;
an ``httpx.Client`` of this process fetches ``/metrics`` ``--requests`` times in each (the server answers
HTTP/1.0, so each request is a new connection and, over HTTPS, a new handshake: a Prometheus scrape's
cost). The three run back to back in each round, their order rotating between rounds. Printed: the median
requests per second of each and their ratio to plain HTTP, and the time of one scrypt check
(:class:`broker.web.password_hash.PasswordHash`, median of 5), which the users file's cache saves on every
request after a user's first, and the time of a cached check; with a Markdown table for ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import base64
import ssl
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from broker.client.groups.lag_evaluation import LagWindow
from broker.record.topic_partition import TopicPartition
from broker.web.basic_auth import BasicAuthenticator
from broker.web.password_hash import PasswordHash
from broker.web.users_file import Role, User, UsersFile, write_users
from broker.web.web_security import WebSecurity
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from pipeline.lag_exporter import start_lag_exporter
from pipeline.lag_metrics import LagCollector

PASSWORD = "bench-password"


def _collector() -> LagCollector:
    collector = LagCollector()
    window = LagWindow(window=2)
    tp = TopicPartition("events", 0)
    for t, (committed, end) in enumerate([(3, 10), (5, 12), (9, 12)]):
        window.observe(1000 * t, {tp: (committed, 1000 * t)}, {tp: end})
    collector.update("audit", "zookeeper", window.evaluate(2500), window.samples())
    return collector


def _rate(security: WebSecurity, requests: int, verify: ssl.SSLContext | bool, auth: bool) -> float:
    server = start_lag_exporter(_collector(), free_port(), security)
    try:
        host = "localhost" if security.ssl_certfile else "127.0.0.1"
        url = f"{security.scheme}://{host}:{server.port}/metrics"
        with httpx.Client(verify=verify, timeout=30, auth=("bench", PASSWORD) if auth else None) as client:
            assert client.get(url).status_code == 200
            started = time.perf_counter()
            for _ in range(requests):
                client.get(url).raise_for_status()
            return requests / (time.perf_counter() - started)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    requests, rounds = (50, 1) if args.quick else (args.requests, args.rounds)
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        ca = CertificateAuthority(base / "ca")
        issued = ca.issue("bench")
        users = base / "users"
        write_users(users, {"bench": User("bench", Role.READ, PasswordHash.make(PASSWORD))})
        verify = ssl.create_default_context(cafile=str(ca.cafile))
        kinds = {
            "http, no users": (WebSecurity("bench", "lag_exporter", "127.0.0.1"), False),
            "http, Basic users": (
                WebSecurity("bench", "lag_exporter", "127.0.0.1", users_file=str(users)),
                True,
            ),
            "https, Basic users": (
                WebSecurity(
                    "bench",
                    "lag_exporter",
                    "localhost",
                    users_file=str(users),
                    ssl_certfile=str(issued.certfile),
                    ssl_keyfile=str(issued.keyfile),
                ),
                True,
            ),
        }
        rates: dict[str, list[float]] = {name: [] for name in kinds}
        names = list(kinds)
        for index in range(rounds):
            order = names[index % len(names) :] + names[: index % len(names)]
            for name in order:
                security, auth = kinds[name]
                rates[name].append(_rate(security, requests, verify, auth))
        hashed = PasswordHash.make(PASSWORD)
        checks = []
        for _ in range(5):
            started = time.perf_counter()
            hashed.verify(PASSWORD)
            checks.append(time.perf_counter() - started)
        authenticator = BasicAuthenticator(UsersFile(users), "bench")
        header = "Basic " + base64.b64encode(f"bench:{PASSWORD}".encode()).decode()
        authenticator.authenticate(header, "127.0.0.1")  # the one scrypt check, then cached
        started = time.perf_counter()
        for _ in range(10_000):
            authenticator.authenticate(header, "127.0.0.1")
        cached_us = (time.perf_counter() - started) / 10_000 * 1e6
    plain = statistics.median(rates[names[0]])
    print(f"{requests} GET /metrics per way and round, {rounds} rounds (medians):")
    print("| server | requests/s | vs plain HTTP |")
    print("| --- | --- | --- |")
    for name in names:
        median = statistics.median(rates[name])
        print(f"| {name} | {median:.0f} | {median / plain:.2f} |")
    print(f"one scrypt check (n=2^15, r=8, p=1): {statistics.median(checks) * 1000:.0f} ms (median of 5)")
    print(f"one cached check of a header (stat of the file, HMAC, lookup): {cached_us:.1f} us (10,000)")


if __name__ == "__main__":
    main()
