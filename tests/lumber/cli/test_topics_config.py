"""``lumber topics alter-config`` and the configs of ``lumber topics describe``, as a subprocess against the
real ZooKeeper: the overrides written to ``/config/topics/<topic>``, refusals naming topic, key and value,
and the describe lines with each config's source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.cluster import zk_paths
from tests.lumber.cli.test_topics import add_brokers, config, topics

__all__ = ["config"]  # the fixture, shared with test_topics.py


def overrides(zk: Any, topic: str) -> dict[str, str]:
    data, _ = zk.get(zk_paths.topic_config_path(topic))
    return zk_paths.decode_topic_config(zk_paths.topic_config_path(topic), data)


def test_alter_config_sets_and_deletes_overrides(zk: Any, config: Path) -> None:
    add_brokers(zk, 1)
    created = topics(config, "create", "events", "--partitions", "1", "--config", "retention.ms=3600000")
    assert (created.returncode, created.stderr) == (0, "")

    altered = topics(
        config,
        "alter-config",
        "events",
        "--set",
        "cleanup.policy=Delete,Compact",
        "--set",
        "segment.bytes=1048576",
    )
    assert (altered.returncode, altered.stderr) == (0, "")
    assert altered.stdout == (
        "topic 'events': configs now cleanup.policy=compact,delete, retention.ms=3600000, "
        "segment.bytes=1048576 (before: retention.ms=3600000)\n"
    )
    assert overrides(zk, "events") == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "3600000",
        "segment.bytes": "1048576",
    }

    deleted = topics(config, "alter-config", "events", "--delete", "retention.ms", "--json")
    assert (deleted.returncode, deleted.stderr) == (0, "")
    assert json.loads(deleted.stdout) == {
        "topic": "events",
        "configs": {"cleanup.policy": "compact,delete", "segment.bytes": "1048576"},
        "before": {"cleanup.policy": "compact,delete", "retention.ms": "3600000", "segment.bytes": "1048576"},
    }

    emptied = topics(
        config, "alter-config", "events", "--delete", "cleanup.policy", "--delete", "segment.bytes"
    )
    assert emptied.stdout == (
        "topic 'events': configs now none (the brokers own settings) (before: cleanup.policy=compact,delete, "
        "segment.bytes=1048576)\n"
    )
    assert overrides(zk, "events") == {}


def test_alter_config_refusals_name_the_topic_key_and_value(zk: Any, config: Path) -> None:
    add_brokers(zk, 1)
    assert topics(config, "create", "events", "--partitions", "1").returncode == 0
    cases = [
        (
            ("--set", "segment.bytes=12"),
            (
                "lumber: error: --set: topic 'events': segment.bytes='12': expected an integer from 128 to "
                "2147483647\n"
            ),
        ),
        (
            ("--set", "cleanup.policy=forever"),
            (
                "lumber: error: --set: topic 'events': cleanup.policy='forever': expected compact, delete, "
                "or both separated by a comma\n"
            ),
        ),
        (
            ("--set", "min.insync.replicas=2"),
            (
                "lumber: error: --set: topic 'events': min.insync.replicas='2': with replication factor 1 it "
                "must be an integer from 1 to 1 (a larger one would refuse every acks=all write)\n"
            ),
        ),
        (
            ("--set", "compression.type=GZIP"),
            (
                "lumber: error: --set: topic 'events': compression.type='GZIP': expected producer or "
                "uncompressed or gzip or snappy or lz4 or zstd\n"
            ),
        ),
        (
            ("--set", "preallocate=true"),
            (
                "lumber: error: --set: topic 'events': Lumber does not read the topic config "
                "'preallocate' (accepted: cleanup.policy, compression.gzip.level, compression.lz4.level, "
                "compression.type, compression.zstd.level, delete.retention.ms, "
                "max.message.bytes, message.timestamp.type, min.cleanable.dirty.ratio, "
                "min.compaction.lag.ms, min.insync.replicas, retention.bytes, retention.ms, segment.bytes, "
                "segment.ms, "
                "unclean.leader.election.enable); set the others in lumber.toml\n"
            ),
        ),
        (
            ("--delete", "preallocate"),
            (
                "lumber: error: --delete preallocate: Lumber does not read the topic config "
                "'preallocate' (accepted: cleanup.policy, compression.gzip.level, compression.lz4.level, "
                "compression.type, compression.zstd.level, delete.retention.ms, "
                "max.message.bytes, message.timestamp.type, min.cleanable.dirty.ratio, "
                "min.compaction.lag.ms, min.insync.replicas, retention.bytes, retention.ms, segment.bytes, "
                "segment.ms, "
                "unclean.leader.election.enable)\n"
            ),
        ),
        (
            ("--set", "retention.ms=1", "--delete", "retention.ms"),
            "lumber: error: topic 'events': retention.ms is both set and deleted\n",
        ),
        ((), "lumber: error: topic 'events': give --set KEY=VALUE or --delete KEY (or both)\n"),
    ]
    for args, stderr in cases:
        result = topics(config, "alter-config", "events", *args)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", stderr)
    assert zk.exists(zk_paths.topic_config_path("events")) is None  # nothing was written

    missing = topics(config, "alter-config", "nope", "--set", "retention.ms=1")
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        2,
        "",
        "lumber: error: topic 'nope' does not exist\n",
    )
    assert zk.exists(zk_paths.topic_config_path("nope")) is None


def test_describe_lists_every_config_with_its_source(zk: Any, config: Path) -> None:
    config.write_text(config.read_text() + "\n[log]\nsegment_bytes = 4194304\n", encoding="utf-8")
    add_brokers(zk, 1)
    created = topics(config, "create", "events", "--partitions", "1", "--config", "cleanup.policy=compact")
    assert (created.returncode, created.stderr) == (0, "")
    described = topics(config, "describe", "events")
    assert (described.returncode, described.stderr) == (0, "")
    lines = described.stdout.splitlines()
    assert lines[0] == "topic 'events': 1 partitions, replication factor 1, configs cleanup.policy=compact"
    assert lines[3:] == [
        "  config                          value       from",
        "  cleanup.policy                  compact     topic override",
        "  compression.gzip.level          -1          default",
        "  compression.lz4.level           9           default",
        "  compression.type                producer    default",
        "  compression.zstd.level          3           default",
        "  delete.retention.ms             86400000    default",
        "  max.message.bytes               1048588     default",
        "  message.timestamp.type          CreateTime  default",
        "  min.cleanable.dirty.ratio       0.5         default",
        "  min.compaction.lag.ms           0           default",
        "  min.insync.replicas             1           default",
        "  retention.bytes                 -1          default",
        "  retention.ms                    604800000   default",
        "  segment.bytes                   4194304     lumber.toml [log] segment_bytes",
        "  segment.ms                      604800000   default",
        "  unclean.leader.election.enable  false       default",
    ]
    as_json = json.loads(topics(config, "describe", "events", "--json").stdout)
    assert as_json["configs"] == {"cleanup.policy": "compact"}
    assert as_json["all_configs"]["cleanup.policy"] == {"value": "compact", "source": "topic override"}
    assert as_json["all_configs"]["segment.bytes"] == {
        "value": "4194304",
        "source": "lumber.toml [log] segment_bytes",
    }
    assert as_json["all_configs"]["retention.ms"] == {"value": "604800000", "source": "default"}
