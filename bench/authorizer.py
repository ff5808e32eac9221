"""What the ACL authorizer costs a broker: produce (batch 50) and consume over SASL_PLAINTEXT with
``authorizer = "acl"`` against the same broker settings without an authorizer, in one run (issue 37).

Run from the repository root (take the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/authorizer.py [--messages 200000] [--rounds 3] [--acls 1000]

It starts a real ZooKeeper and two Lumber broker processes (separate chroots), each with one SASL_PLAINTEXT
listener for the clients (and a PLAINTEXT one, the inter-broker listener, ``User:ANONYMOUS`` a super user)
and a SCRAM-SHA-512 user ``bench``. The first checks every request against ``--acls`` bindings of
other principals and topics (literal and prefixed, spread over names that share the benchmark topic's first
letters, so that each check walks prefixes that exist) plus bench's own Write, Read and group Read; the
second has no authorizer. With confluent-kafka, 200-byte values, one partition per case:

1. **produce, batch 50**: ``acks=1``, ``batch.num.messages=50``, ``linger.ms=5``;
2. **consume**: the topic just written, from offset 0, the partition assigned (each Fetch is checked).

A warm-up of 1,000 messages per case comes first (not counted). Cases alternate within each round, in the
opposite order every other round; the best of ``--rounds`` counts. It prints messages/s per case and the
ratios with / without the authorizer.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.tls import consume, produce
from broker.cluster.acl_store import AclStore
from broker.cluster.user_credential_store import UserCredentialStore
from broker.network.scram_credential import ScramCredential, ScramMechanism
from broker.security.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.broker_cluster import BrokerCluster
from tests.support.zookeeper import make_chroot

PASSWORD = "bench-password"


def noise(count: int) -> list[AclBinding]:
    """``count`` bindings of other principals on names that share the benchmark topics' first letters."""
    bindings = []
    for i in range(count):
        pattern_type = PatternType.PREFIXED if i % 4 == 0 else PatternType.LITERAL
        name = f"t{i % 7}-" if pattern_type is PatternType.PREFIXED and i % 8 == 0 else f"t{i}-other-{i}"
        bindings.append(
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, name, pattern_type),
                AccessControlEntry(f"User:u{i}", "*", AclOperation.READ, AclPermissionType.ALLOW),
            )
        )
    return bindings


def start_broker(cluster: BrokerCluster, authorizer: bool, acls: int) -> dict[str, Any]:
    plain, port = free_port(), free_port()
    UserCredentialStore(cluster.zk).upsert(
        "bench",
        {ScramMechanism.SCRAM_SHA_512: ScramCredential.generate(PASSWORD, ScramMechanism.SCRAM_SHA_512)},
    )
    settings: dict[str, Any] = {
        # the broker's own PLAINTEXT listener first (the inter-broker one), the clients' SASL one second
        "listeners": [f"PLAINTEXT://127.0.0.1:{plain}", f"SASL_PLAINTEXT://127.0.0.1:{port}"],
        "sasl_enabled_mechanisms": ["SCRAM-SHA-512"],
        "flush_ms": 1000,
        "num_io_threads": 4,
    }
    if authorizer:
        mine = [
            AclBinding(
                ResourcePattern(resource_type, name, PatternType.PREFIXED),
                AccessControlEntry("User:bench", "*", operation, AclPermissionType.ALLOW),
            )
            for resource_type, name, operation in (
                (ResourceType.TOPIC, "t", AclOperation.WRITE),
                (ResourceType.TOPIC, "t", AclOperation.READ),
                (ResourceType.TOPIC, "warm-", AclOperation.ALL),
                (ResourceType.GROUP, "bench-", AclOperation.READ),
            )
        ]
        AclStore(cluster.zk).add([*mine, *noise(acls)])
        settings.update(authorizer="acl", super_users=["User:ANONYMOUS"])
    cluster.add_broker(settings, port=plain)
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": PASSWORD,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acls", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lumber-bench-authorizer-") as tmp:
        base = Path(tmp)
        zookeeper = ZooKeeperServer(base / "zookeeper", free_port())
        zookeeper.start()
        clusters: list[BrokerCluster] = []
        try:
            cases: dict[str, tuple[BrokerCluster, dict[str, Any]]] = {}
            for name, authorizer in (("with ACLs", True), ("without", False)):
                cluster = BrokerCluster(make_chroot(zookeeper.connect, name.replace(" ", "-")), base / name)
                clusters.append(cluster)
                cases[name] = (cluster, start_broker(cluster, authorizer, args.acls))
            for name, (cluster, settings) in cases.items():  # not counted: __consumer_offsets, connections
                warm = f"warm-{name.replace(' ', '-')}"
                cluster.create_topic(warm, 1)
                produce(settings, warm, 1000)
                consume(settings, warm, 1000)
            best: dict[str, dict[str, float]] = {name: {"produce": 0.0, "consume": 0.0} for name in cases}
            for round_ in range(args.rounds):
                # the order flips every round, so that neither case always follows the other's work
                order = list(cases.items()) if round_ % 2 == 0 else list(reversed(cases.items()))
                for name, (cluster, settings) in order:
                    topic = f"t{round_}-{name.replace(' ', '-')}"
                    cluster.create_topic(topic, 1)
                    best[name]["produce"] = max(
                        best[name]["produce"], produce(settings, topic, args.messages)
                    )
                    best[name]["consume"] = max(
                        best[name]["consume"], consume(settings, topic, args.messages)
                    )
                    print(f"round {round_ + 1} {name}: {best[name]}", flush=True)
        finally:
            for cluster in clusters:
                cluster.stop()
            zookeeper.stop()
    print(f"\n{args.messages} messages of 200 bytes, {args.acls} other ACLs, best of {args.rounds} rounds:")
    for name, figures in best.items():
        produced, consumed = figures["produce"], figures["consume"]
        print(f"  {name:10} produce (batch 50) {produced:>10,.0f}   consume {consumed:>10,.0f}")
    for what in ("produce", "consume"):
        print(f"  with / without ACLs {what}: {best['with ACLs'][what] / best['without'][what]:.2f}")


if __name__ == "__main__":
    main()
