"""lumber/cli/cluster_options.py and the duration flags: one way to name the cluster, the topics, a time."""

from __future__ import annotations

import logging

import pytest

from lumber.cli import build_parser
from lumber.cli.cluster_options import with_cluster_options
from lumber.config import LumberConfig


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list", "--zookeeper", "zk:2181/x"],
        ["groups", "list", "--zookeeper", "zk:2181/x"],
        ["broker", "start", "--zookeeper", "zk:2181/x"],
        ["schemas", "serve", "--zookeeper", "zk:2181/x"],
        ["produce", "t", "--zookeeper", "zk:2181/x"],
        ["consume", "t", "--zookeeper", "zk:2181/x"],
        ["etl", "run", "--zookeeper", "zk:2181/x"],
        ["etl", "status", "--zookeeper", "zk:2181/x"],
        ["etl", "schedule", "--zookeeper", "zk:2181/x"],
        ["audit", "verify", "--zookeeper", "zk:2181/x"],
        ["console", "--zookeeper", "zk:2181/x"],
    ],
)
def test_every_cluster_command_takes_zookeeper(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    config = with_cluster_options(args, LumberConfig())
    assert config.zookeeper.connect == "zk:2181/x"


def test_bootstrap_servers_repeat_or_comma_and_reach_every_client_section() -> None:
    args = build_parser().parse_args(
        ["consume", "t", "--bootstrap-server", "a:9092,b:9092", "--bootstrap-server", "c:9092"]
    )
    assert args.bootstrap_server == ["a:9092", "b:9092", "c:9092"]
    config = with_cluster_options(args, LumberConfig())
    expected = ["a:9092", "b:9092", "c:9092"]
    assert config.consumer.bootstrap_servers == config.producer.bootstrap_servers == expected
    assert config.load.bootstrap_servers == expected
    assert with_cluster_options(build_parser().parse_args(["consume", "t"]), LumberConfig()) == LumberConfig()


def test_zookeeper_connect_still_works_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        args = build_parser().parse_args(["topics", "list", "--zookeeper-connect", "old:2181"])
    assert args.zookeeper_connect == "old:2181"
    assert _warnings(caplog) == ["--zookeeper-connect is deprecated, use --zookeeper"]


def test_topics_is_a_list_everywhere_and_the_mirror_regex_has_its_own_flag(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parser = build_parser()
    assert parser.parse_args(["etl", "run", "--topics", "a,b", "--topics", "c"]).topics == "a,b,c"
    assert parser.parse_args(["audit", "verify", "--topics", "a,b", "--topic", "c"]).topic == ["a", "b", "c"]
    mirror = ["mirror", "--source-zookeeper", "s:1", "--target-zookeeper", "t:1"]
    assert parser.parse_args([*mirror, "--topics-regex", "page_.*"]).topics == "page_.*"
    assert caplog.records == []
    with caplog.at_level(logging.WARNING):
        assert parser.parse_args([*mirror, "--topics", "page_.*"]).topics == "page_.*"
    assert _warnings(caplog) == ["--topics is deprecated, use --topics-regex"]


@pytest.mark.parametrize(
    ("flags", "dest", "ms"),
    [
        (["consume", "t", "--timeout", "10m"], "timeout_ms", 600_000),
        (["consume", "t", "--timeout", "250ms"], "timeout_ms", 250),
        (["consume", "t", "--timeout-ms", "1500"], "timeout_ms", 1500),
        (["consume", "t", "--timeout-ms", "2s"], "timeout_ms", 2000),
        (["mirror", "--topics-regex", "x", "--audit-interval", "1m"], "audit_interval_ms", 60_000),
        (["mirror", "--topics-regex", "x", "--audit-interval-ms", "0"], "audit_interval_ms", 0),
        (["mirror", "--topics-regex", "x", "--topic-refresh", "1h30m"], "topic_refresh_ms", 5_400_000),
        (["mirror", "--topics-regex", "x"], "topic_refresh_ms", None),  # then [mirror] topic_refresh_ms
    ],
)
def test_duration_flags_take_10m_and_the_ms_spellings_take_integers(
    flags: list[str], dest: str, ms: int | None
) -> None:
    if flags[0] == "mirror":
        flags = [flags[0], "--source-zookeeper", "s:1", "--target-zookeeper", "t:1", *flags[1:]]
    assert getattr(build_parser().parse_args(flags), dest) == ms


def test_a_bad_duration_is_a_usage_error_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["consume", "t", "--timeout", "5"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "lumber consume: error: --timeout '5': expected a duration such as 90s, 30m, 1h, 2h30m or 1d\n"
    )


def test_every_duration_flag_says_it_takes_10m(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["consume", "--help"],
        ["mirror", "--help"],
        ["audit", "verify", "--help"],
        ["etl", "schedule", "--help"],
        ["groups", "lag", "--help"],
    ):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        assert "90s, 10m, 1h" in " ".join(capsys.readouterr().out.split())
