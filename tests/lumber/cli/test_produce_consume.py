"""``lumber produce`` and ``lumber consume`` as subprocesses against a real broker (and registry)."""

from __future__ import annotations

import io
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fastavro import json_reader, parse_schema

from broker.record.topic_partition import TopicPartition
from lumber.cli import main
from schemas.client import SchemaRegistryClient
from schemas.serde import AvroSerde
from tests.broker.client.helpers import consumer, producer, read_batches, read_records
from tests.support.broker_cluster import servers
from tests.support.registry import RegistryProcess


def lumber(*args: str, stdin: bytes = b"", timeout_s: float = 60) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "LUMBER_CONSUMER__REQUEST_TIMEOUT_MS": "3000",
        "LUMBER_PRODUCER__MAX_BLOCK_MS": "3000",
    }
    return subprocess.run(
        [sys.executable, "-m", "lumber", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout_s,
        check=False,
        env=env,
    )


def test_produce_then_consume_round_trip(broker_cluster: Any) -> None:
    broker_cluster.create_topic("console", 1)
    server = servers(broker_cluster)[0]
    lines = b"k1\tfirst value\nno key here\nk2\t\n\tempty key\nlast line without newline"
    produced = lumber(
        "produce",
        "console",
        "--key-separator",
        "TAB",
        "--acks",
        "all",
        "--compression",
        "zstd",
        "--bootstrap-server",
        server,
        stdin=lines,
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stderr == b""  # quiet on success; -v logs the count

    with consumer(broker_cluster, TopicPartition("console", 0)) as c:
        records = read_records(c, 5)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, b"k1", b"first value"),
        (1, None, b"no key here"),
        (2, b"k2", b""),
        (3, b"", b"empty key"),
        (4, None, b"last line without newline"),
    ]
    assert {r.header("host") for r in records} == {socket.gethostname().encode()}

    consumed = lumber(
        "consume", "console", "--from-beginning", "--max", "5", "--print-key", "--bootstrap-server", server
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == (
        b"k1\tfirst value\nnull\tno key here\nk2\t\n\tempty key\nnull\tlast line without newline\n"
    )
    assert consumed.stderr == b""
    verbose = lumber(  # it stops while its next fetch waits for records
        "consume", "console", "--from-beginning", "--timeout-ms", "1000", "--bootstrap-server", server, "-v"
    )
    assert verbose.returncode == 0, verbose.stderr
    assert "INFO lumber.cli.consume: consumed 5 records from console" in verbose.stderr.decode()
    # closing the consumer ends its fetch in flight: a normal end, not logged as a failure even at INFO
    assert "fail" not in verbose.stderr.decode(), verbose.stderr.decode()

    offsets = lumber(
        "consume",
        "console",
        "--partition",
        "0",
        "--offset",
        "3",
        "--timeout-ms",
        "1500",
        "--print-offset",
        "--bootstrap-server",
        server,
    )
    assert offsets.returncode == 0, offsets.stderr
    assert offsets.stdout == b"0\t3\tempty key\n0\t4\tlast line without newline\n"


def test_console_tools_find_the_cluster_in_zookeeper(broker_cluster: Any, tmp_path: Any) -> None:
    broker_cluster.create_topic("zk-console", 2)
    config = tmp_path / "lumber.toml"
    config.write_text(f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n')
    produced = lumber("--config", str(config), "produce", "zk-console", "--partition", "1", stdin=b"a\nb\n")
    assert (produced.returncode, produced.stderr) == (0, b"")
    consumed = lumber(
        "--config", str(config), "consume", "zk-console", "--from-beginning", "--max", "2", "--print-offset"
    )
    assert (consumed.returncode, consumed.stderr) == (0, b"")
    assert consumed.stdout == b"1\t0\ta\n1\t1\tb\n"


def test_console_errors_are_clear(broker_cluster: Any) -> None:
    broker_cluster.create_topic("console", 1)
    server = servers(broker_cluster)[0]
    bad_partition = lumber(
        "consume", "console", "--partition", "5", "--max", "1", "--bootstrap-server", server
    )
    assert bad_partition.returncode == 1
    assert "topic 'console' has partitions 0-0, there is no partition 5" in bad_partition.stderr.decode()
    bad_server = lumber("produce", "console", "--bootstrap-server", "localhost", stdin=b"x\n")
    assert bad_server.returncode == 1
    assert "'localhost' is not host:port" in bad_server.stderr.decode()


# ------------------------------------------------------------------------------------------ unknown topics

LUMBER = Path(sys.executable).parent / "lumber"


def test_an_unknown_topic_is_answered_at_once_with_a_command_that_creates_it(
    broker_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "lumber.toml"
    config.write_text(f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n')
    server = servers(broker_cluster)[0]
    create = f"lumber --config {config} topics create page_veiw --partitions 1"
    for args in (
        ["consume", "page_veiw"],  # default timeouts: request_timeout_ms is 30 s
        ["consume", "page_veiw", "--timeout-ms", "3000", "--bootstrap-server", server],
        ["produce", "page_veiw"],
        ["produce", "page_veiw", "--bootstrap-server", server],
    ):
        started = time.monotonic()
        assert main(["--config", str(config), *args]) == 2
        elapsed = time.monotonic() - started
        err = capsys.readouterr().err
        assert elapsed < 2, (args, elapsed)
        assert err.startswith("lumber: error: topic 'page_veiw' does not exist ("), err
        assert err.endswith(f"UNKNOWN_TOPIC_OR_PARTITION (error code 3)); create it with:  {create}\n"), err
    assert "page_veiw" not in broker_cluster.zk.get_children("/brokers/topics")  # nothing was auto-created

    # the advice works as printed, from the `lumber` the user ran
    refused = subprocess.run(
        [str(LUMBER), "--config", str(config), "produce", "page_veiw"],
        input=b"hello\n",
        capture_output=True,
        timeout=60,
        check=False,
        cwd=LUMBER.parent.parent.parent,
    )
    assert refused.returncode == 2  # a topic that is not there: bad usage, as for `topics describe`
    advice = refused.stderr.decode().rsplit("create it with:  ", 1)[1].strip()
    assert advice == f".venv/bin/lumber --config {config} topics create page_veiw --partitions 1"
    created = subprocess.run(
        shlex.split(advice), capture_output=True, timeout=60, check=False, cwd=LUMBER.parent.parent.parent
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.decode().startswith("created topic 'page_veiw' with 1 partitions")
    again = lumber("--config", str(config), "produce", "page_veiw", stdin=b"hello\n")
    assert (again.returncode, again.stderr) == (0, b"")
    with consumer(broker_cluster, TopicPartition("page_veiw", 0)) as c:
        assert [r.value for r in read_records(c, 1)] == [b"hello"]


# ------------------------------------------------------------------------------------------ Avro

SCHEMA = {
    "type": "record",
    "name": "PageView",
    "namespace": "test.cli",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
        {"name": "timestamp_ms", "type": "long"},
        {"name": "blob", "type": "bytes"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
RECORDS: list[dict[str, Any]] = [
    {"user": "ann", "referrer": None, "timestamp_ms": 1, "blob": b"", "tags": []},
    {"user": "bob\nnext line", "referrer": "https://a.example/x\ty", "timestamp_ms": 2, "blob": b"\x00\n\xff",
     "tags": ["a", "b"]},
    {"user": "zoë \u2028 \U0001f600", "referrer": "r", "timestamp_ms": -3, "blob": b"\\", "tags": ["\r"]},
    {"user": "dan", "referrer": None, "timestamp_ms": 2**62, "blob": b"x" * 40, "tags": ["x"] * 3},
]  # fmt: skip


def decoded(line: bytes) -> Any:
    """A line of `lumber consume` read back with Avro's JSON decoding."""
    return next(iter(json_reader(io.StringIO(line.decode("utf-8")), parse_schema(SCHEMA))))


def test_consume_decodes_avro_and_produce_encodes_it(
    broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path
) -> None:
    broker_cluster.create_topic("avro-views", 1)
    server = servers(broker_cluster)[0]
    schema_file = tmp_path / "page_view.avsc"
    schema_file.write_text(json.dumps(SCHEMA))
    registry = ["--registry-url", load_registry.url, "--bootstrap-server", server]
    with SchemaRegistryClient(load_registry.url) as client:
        schema_id = client.register("avro-views-value", json.dumps(SCHEMA))
        serde = AvroSerde(client)
        payloads = [serde.encode(schema_id, record) for record in RECORDS]
    with producer(broker_cluster, acks="all") as p:
        for payload in payloads[:2]:  # two records from a library producer, as the demo's frontends send them
            p.send("avro-views", payload, partition=0)
        p.flush()

    # Avro's JSON encoding in, Confluent-framed Avro out: the same bytes as the library's
    lines = b"".join(json.dumps(avro_json(r)).encode() + b"\n" for r in RECORDS[2:])
    produced = lumber(
        "produce", "avro-views", "--value-format", "avro", "--schema-file", str(schema_file), *registry,
        stdin=lines,
    )  # fmt: skip
    assert (produced.returncode, produced.stderr) == (0, b"")

    consumed = lumber("consume", "avro-views", "--from-beginning", "--max", "4", *registry)
    assert (consumed.returncode, consumed.stderr) == (0, b"")
    out = consumed.stdout.split(b"\n")
    assert out[-1] == b""
    assert len(out[:-1]) == 4 == consumed.stdout.count(b"\n")
    assert [decoded(line) for line in out[:-1]] == RECORDS
    assert out[0] == b'{"user":"ann","referrer":null,"timestamp_ms":1,"blob":"","tags":[]}'
    assert out[2].startswith(b'{"user":"zo\xc3\xab \\u2028 \xf0\x9f\x98\x80","referrer":{"string":"r"}')

    with consumer(broker_cluster, TopicPartition("avro-views", 0)) as c:
        stored = [r.value for r in read_records(c, 4)]
    assert stored == payloads  # what produce sent is byte for byte what AvroSerde encodes

    hexed = lumber(
        "consume", "avro-views", "--from-beginning", "--max", "4", "--value-format", "hex", *registry
    )
    assert hexed.stdout == b"".join(payload.hex().encode() + b"\n" for payload in payloads)
    raw = lumber("consume", "avro-views", "--offset", "1", "--max", "1", "--value-format", "raw", *registry)
    assert raw.stdout.startswith(b"\\x00\\x00\\x00\\x00")  # the magic byte and the id's high bytes
    assert raw.stdout.count(b"\n") == 1
    assert b"bob\\nnext line" in raw.stdout

    # a value that is not Avro: --value-format avro says so, naming the record
    with producer(broker_cluster, acks="all") as p:
        p.send("avro-views", b"plain text", partition=0).result(10)
    refused = lumber(
        "consume", "avro-views", "--offset", "4", "--max", "1", "--value-format", "avro", *registry
    )
    assert refused.returncode == 1
    assert refused.stderr.decode() == (
        "lumber: error: avro-views-0 offset 4 value: magic byte is 0x70 at offset 0, expected 0x00 (not "
        "Confluent-framed Avro; try --value-format raw or hex)\n"
    )


def test_consume_prints_timestamps_headers_keys_and_escapes_raw_values(broker_cluster: Any) -> None:
    broker_cluster.create_topic("fields", 1)
    server = servers(broker_cluster)[0]
    with producer(broker_cluster, acks="all", host_name="web-1") as p:
        p.send(
            "fields",
            b"line1\nline2\t\xff\x01end \\ ok",
            b"k\n1",
            partition=0,
            timestamp_ms=1234,
            headers=[("trace", b"a\nb"), ("none", None)],
        ).result(10)
        p.send("fields", None, None, partition=0, timestamp_ms=1235, headers=[]).result(10)
    flags = ["--print-timestamp", "--print-offset", "--print-headers", "--print-key", "--separator", "|"]
    consumed = lumber(
        "consume", "fields", "--from-beginning", "--max", "2", *flags, "--bootstrap-server", server
    )
    assert (consumed.returncode, consumed.stderr) == (0, b"")
    host = b"web-1"  # the producer's own header comes first
    assert consumed.stdout == (
        b"CreateTime:1234|0|0|host:"
        + host
        + b",trace:a\\nb,none:null|k\\n1|line1\\nline2\\t\\xff\\x01end \\ ok\n"
        b"CreateTime:1235|0|1|host:" + host + b"|null|null\n"
    )
    json_refused = lumber(
        "consume",
        "fields",
        "--from-beginning",
        "--max",
        "1",
        "--value-format",
        "json",
        "--bootstrap-server",
        server,
    )
    assert json_refused.returncode == 1
    assert json_refused.stderr.decode().startswith("lumber: error: fields-0 offset 0 value is not JSON: ")


def avro_json(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` in Avro's JSON encoding (the union wrapped in its branch, bytes as Latin-1 text)."""
    return {
        **record,
        "referrer": None if record["referrer"] is None else {"string": record["referrer"]},
        "blob": record["blob"].decode("latin-1"),
    }


def test_produce_refuses_lines_that_do_not_fit_the_schema_and_sends_the_rest(
    broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path
) -> None:
    broker_cluster.create_topic("avro-strict", 1)
    server = servers(broker_cluster)[0]
    schema_file = tmp_path / "page_view.avsc"
    schema_file.write_text(json.dumps(SCHEMA))
    good = avro_json(RECORDS[0])
    lines = [
        json.dumps(good),
        json.dumps({**good, "referrer": "not wrapped"}),  # a union value must name its branch
        json.dumps({**good, "extra": 1}),
        "not json",
        json.dumps({k: v for k, v in good.items() if k != "user"}),
        json.dumps({**avro_json(RECORDS[1])}),
    ]
    produced = lumber(
        "produce", "avro-strict", "--value-format", "avro", "--schema-file", str(schema_file),
        "--subject", "strict-views", "--registry-url", load_registry.url, "--bootstrap-server", server,
        stdin="\n".join(lines).encode() + b"\n",
    )  # fmt: skip
    assert produced.returncode == 1
    errors = produced.stderr.decode().splitlines()
    assert [e.split(":")[0:2] for e in errors[:4]] == [["lumber", " not sent"]] * 4
    assert errors[0].startswith(
        f"lumber: not sent: line 2: does not fit {schema_file}: write a non-null union"
    )
    assert errors[1] == f"lumber: not sent: line 3: fields ['extra'] are not in the schema of {schema_file}"
    assert errors[2].startswith("lumber: not sent: line 4: not JSON: Expecting value")
    assert errors[3].startswith(f"lumber: not sent: line 5: does not fit {schema_file}: ValueError: no value")
    assert errors[4:] == ["lumber: 4 line(s) failed, 2 records sent"]
    with SchemaRegistryClient(load_registry.url) as client:
        registered = client.get_latest("strict-views")
        serde = AvroSerde(client)
        with consumer(broker_cluster, TopicPartition("avro-strict", 0)) as c:
            sent = [r.value or b"" for r in read_records(c, 2)]
        assert [serde.schema_id_of(v) for v in sent] == [registered.schema_id] * 2
        assert [serde.decode(v) for v in sent] == [RECORDS[0], RECORDS[1]]

    usage = lumber("produce", "avro-strict", "--value-format", "avro", "--bootstrap-server", server)
    assert (usage.returncode, usage.stderr) == (
        2,
        b"lumber produce: --value-format avro needs --schema-file F.avsc\n",
    )


def test_json_values_are_checked_on_the_way_in_and_printed_compactly(broker_cluster: Any) -> None:
    broker_cluster.create_topic("json-lines", 1)
    server = ["--bootstrap-server", servers(broker_cluster)[0]]
    lines = b'{"a": 1, "b": ["x\\ny", "\\u00e9"]}\nnope\n'
    produced = lumber("produce", "json-lines", "--value-format", "json", *server, stdin=lines)
    assert produced.returncode == 1
    assert produced.stderr.decode() == (
        "lumber: not sent: line 2: not JSON: Expecting value: line 1 column 1 (char 0)\n"
        "lumber: 1 line(s) failed, 1 records sent\n"
    )
    consumed = lumber(
        "consume", "json-lines", "--from-beginning", "--max", "1", "--value-format", "json", *server
    )
    assert (consumed.returncode, consumed.stderr) == (0, b"")
    assert consumed.stdout == '{"a":1,"b":["x\\ny","é"]}\n'.encode()


def test_produce_with_acks_1_turns_the_idempotent_producer_off(broker_cluster: Any) -> None:
    broker_cluster.create_topic("console1", 1)
    server = servers(broker_cluster)[0]
    produced = lumber("produce", "console1", "--acks", "1", "--bootstrap-server", server, stdin=b"a\nb\n")
    assert produced.returncode == 0, produced.stderr
    with consumer(broker_cluster, TopicPartition("console1", 0)) as c:
        batches = read_batches(c, 2)
        c.seek(TopicPartition("console1", 0), 0)
        records = read_records(c, 2)
    assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b")]
    assert {b.batch.producer_id for b in batches} == {-1}  # not idempotent


@pytest.mark.parametrize("kind", ["zookeeper", "kafka"])
def test_consume_in_a_group_commits_what_it_printed_and_no_commit_peeks(
    broker_cluster: Any, tmp_path: Path, kind: str
) -> None:
    """``consume --group`` reads from the group's offsets and commits what it printed, as
    kafka-console-consumer --group does; ``--no-commit`` reads the same and moves nothing."""
    broker_cluster.create_topic("views", 1)
    server = servers(broker_cluster)[0]
    produced = lumber(
        "produce", "views", "--bootstrap-server", server, stdin=b"\n".join(b"%d" % n for n in range(10))
    )
    assert produced.returncode == 0, produced.stderr
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n\n'
        f'[consumer]\nbootstrap_servers = ["{server}"]\n'
    )
    group = [
        "--config",
        str(config),
        "consume",
        "views",
        "--group",
        "readers",
        "--kind",
        kind,
        "--timeout",
        "3s",
    ]

    first = lumber(*group, "--from-beginning", "--max", "4")
    assert (first.returncode, first.stdout, first.stderr) == (0, b"0\n1\n2\n3\n", b"")
    peek = lumber(*group, "--no-commit", "--max", "2")
    assert (peek.returncode, peek.stdout) == (0, b"4\n5\n")  # from the committed offset, 4
    rest = lumber(*group)  # the peek moved nothing: from 4 again, to the end
    assert (rest.returncode, rest.stdout) == (0, b"".join(b"%d\n" % n for n in range(4, 10)))
    described = lumber(
        "--config", str(config), "groups", "describe", "--group", "readers", "--kind", kind, "--json"
    )
    assert described.returncode == 0, described.stderr
    assert [
        (p["partition"], p["committed"], p["lag"]) for p in json.loads(described.stdout)["partitions"]
    ] == [(0, 10, 0)]
    again = lumber(*group, "--timeout", "1s")
    assert (again.returncode, again.stdout) == (0, b"")  # nothing left for the group

    misused = lumber("--config", str(config), "consume", "views", "--group", "readers", "--partition", "0")
    assert misused.returncode == 2
    assert b"--group reads the group's partitions from its offsets" in misused.stderr
    assert lumber("--config", str(config), "consume", "views", "--no-commit").returncode == 2
