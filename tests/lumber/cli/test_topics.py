"""``lumber topics`` as a subprocess against the real ZooKeeper: the refusals made before anything is written.

What reads or writes partition states (create, describe, list --under-replicated, elect-leaders) is in
``test_topics_replication.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.cluster.zk_paths import broker_path, encode_broker


@pytest.fixture
def config(tmp_path: Path, zk_connect: str) -> Path:
    path = tmp_path / "lumber.toml"
    path.write_text(f'[zookeeper]\nconnect = "{zk_connect}"\nconnect_timeout_ms = 10000\n', encoding="utf-8")
    return path


def topics(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "topics", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def add_brokers(zk: Any, *broker_ids: int) -> None:
    for broker_id in broker_ids:
        zk.create(
            broker_path(broker_id),
            encode_broker("127.0.0.1", 9090 + broker_id, 1_700_000_000_000),
            ephemeral=True,
            makepath=True,
        )


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("0:1,1", "'1' is not PARTITION:BROKER[:BROKER...] (expected e.g. \"0:1:2,1:2:0\")"),
        ("0:1:2:1", "partition 0 names broker 1 twice (1:2:1): each replica must be on another broker"),
        ("0:1:2,1:2", "partition 1 has 1 replicas, partition 0 has 2: every partition needs the same number"),
        ("0:1,0:2", "partition 0 is assigned twice"),
    ],
)
def test_bad_assignment_is_a_usage_error(config: Path, assignment: str, message: str) -> None:
    result = topics(config, "create", "x", "--assignment", assignment)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.endswith(f"lumber topics create: error: argument --assignment: {message}\n")


def test_replication_factor_zero_is_a_usage_error(config: Path) -> None:
    result = topics(config, "create", "x", "--partitions", "1", "--replication-factor", "0")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.endswith(
        "lumber topics create: error: argument --replication-factor: 0: a partition needs at least 1 "
        "replica\n"
    )


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (
            ("create", "x", "--partitions", "3", "--replication-factor", "4"),
            (
                "lumber: error: topic 'x': --replication-factor 4 needs 4 live brokers, but 3 are live: "
                "1, 2, 3\n"
            ),
        ),
        (
            ("create", "x", "--assignment", "0:1:2", "--replication-factor", "2"),
            (
                "lumber: error: topic 'x': give --replication-factor or --assignment, not both (the "
                "assignment's lists are the replicas)\n"
            ),
        ),
        (
            ("create", "x", "--partitions", "1", "--config", "preallocate=true"),
            (
                "lumber: error: --config: topic 'x': Lumber does not read the topic config "
                "'preallocate' (accepted: cleanup.policy, compression.gzip.level, compression.lz4.level, "
                "compression.type, compression.zstd.level, delete.retention.ms, "
                "max.message.bytes, message.timestamp.type, min.cleanable.dirty.ratio, "
                "min.compaction.lag.ms, min.insync.replicas, retention.bytes, retention.ms, segment.bytes, "
                "segment.ms, "
                "unclean.leader.election.enable); set the others in lumber.toml\n"
            ),
        ),
        (
            (
                "create",
                "x",
                "--partitions",
                "1",
                "--replication-factor",
                "2",
                "--config",
                "min.insync.replicas=3",
            ),
            (
                "lumber: error: --config: topic 'x': min.insync.replicas='3': with replication factor 2 it "
                "must be an integer from 1 to 2 (a larger one would refuse every acks=all write)\n"
            ),
        ),
        (
            ("create", "x", "--partitions", "1", "--config", "unclean.leader.election.enable=maybe"),
            (
                "lumber: error: --config: topic 'x': unclean.leader.election.enable='maybe': expected true "
                "or false\n"
            ),
        ),
        (
            ("create", "x", "--partitions", "1", "--config", "compression.gzip.level=0"),
            (
                "lumber: error: --config: topic 'x': compression.gzip.level='0': expected an integer from 1 "
                "to 9, or -1\n"
            ),
        ),
        (
            ("create", "x", "--partitions", "1", "--config", "min.insync.replicas"),
            "lumber: error: --config 'min.insync.replicas': expected KEY=VALUE, e.g. min.insync.replicas=2\n",
        ),
        (
            (
                "create",
                "x",
                "--partitions",
                "1",
                "--config",
                "min.insync.replicas=1",
                "--config",
                "min.insync.replicas=1",
            ),
            "lumber: error: --config min.insync.replicas is given twice ('1' and '1')\n",
        ),
        (
            ("elect-leaders", "--partition", "1"),
            "lumber: error: --partition needs --topic: which topic's partition?\n",
        ),
    ],
)
def test_refused_before_anything_is_written(
    zk: Any, config: Path, args: tuple[str, ...], stderr: str
) -> None:
    add_brokers(zk, 1, 2, 3)
    result = topics(config, *args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", stderr)
    assert zk.exists("/brokers/topics/x") is None
    assert zk.exists("/config/topics/x") is None


def test_default_replication_factor_above_the_live_brokers_names_the_config_key(
    zk: Any, config: Path
) -> None:
    config.write_text(config.read_text() + "\n[broker]\ndefault_replication_factor = 3\n", encoding="utf-8")
    add_brokers(zk, 1)
    result = topics(config, "create", "x", "--partitions", "2")
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        (
            "lumber: error: topic 'x': replication factor 3 ([broker] default_replication_factor) needs 3 "
            "live brokers, but 1 is live: 1\n"
        ),
    )
    assert zk.exists("/brokers/topics/x") is None


def test_help_names_the_replication_options(config: Path) -> None:
    create = topics(config, "create", "--help")
    assert create.returncode == 0
    text = " ".join(create.stdout.split())
    assert (
        "--replication-factor N replicas of each partition, at most the live brokers (default: [broker] "
        "default_replication_factor)" in text
    )
    assert (
        "--config KEY=VALUE a topic config, repeatable: cleanup.policy (compact, delete, or both "
        "separated by a comma), compression.gzip.level (an integer from 1 to 9, or -1), "
        "compression.lz4.level (an integer from 1 to 17), compression.type (producer or uncompressed or "
        "gzip or snappy or lz4 or zstd), compression.zstd.level (an integer from -131072 to 22), "
        "delete.retention.ms (an integer of at least 0), max.message.bytes (an "
        "integer from 61 to 2147483647), message.timestamp.type (CreateTime or LogAppendTime), "
        "min.cleanable.dirty.ratio (a number from 0 to 1), "
        "min.compaction.lag.ms (an integer of at least 0), min.insync.replicas (an integer from 1 to the "
        "replication factor), retention.bytes (an integer of at least -1), retention.ms (an integer of "
        "at least -1), segment.bytes (an integer from 128 to 2147483647), segment.ms (an integer of at "
        "least 1), unclean.leader.election.enable (true or false)" in text
    )
    listing = " ".join(topics(config, "list", "--help").stdout.split())
    assert "--under-replicated list the partitions whose ISR is smaller than their replicas" in listing
    elect = " ".join(topics(config, "elect-leaders", "--help").stdout.split())
    assert (
        "--timeout DURATION how long to wait for the controller to move the leaders, a duration: "
        "250ms, 90s, 10m, 1h, 2h30m, 1d (default: 30s)" in elect
    )
    assert "--zookeeper CONNECT" in elect
