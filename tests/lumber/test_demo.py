"""``lumber demo``: its state-folder rules, its printing, and (slow) a small demo end to end."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from lumber.config import LumberConfig, config_from_mapping, load_config
from lumber.demo import MARKER_FILE, Demo, DemoOptions
from lumber.demo_errors import DemoError
from lumber.demo_text import format_table, isr_text, warehouse_tree
from lumber.dev.dev_stack import DevStack
from lumber.dev.process import ProcessHandle, process_start_ticks
from pipeline.fs import open_filesystem
from tests.support.dev_ports import dev_port_env


def demo_in(state_dir: Path) -> Demo:
    return Demo(DemoOptions(state_dir=state_dir), LumberConfig(), out=io.StringIO())


def test_a_foreign_folder_is_refused_and_an_old_demo_folder_is_cleared(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(DemoError, match="is not a demo's state folder"):
        demo_in(foreign)._prepare_state_dir()
    assert (foreign / "notes.txt").read_text() == "mine"

    old = tmp_path / "old-demo"
    (old / "warehouse" / "page_view").mkdir(parents=True)
    (old / MARKER_FILE).write_text("")
    demo_in(old)._prepare_state_dir()
    assert sorted(p.name for p in old.iterdir()) == [MARKER_FILE]


def test_a_running_demo_stack_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    state.mkdir()
    (state / MARKER_FILE).write_text("")
    # a stack.json whose "zookeeper" is this very test process: alive, so the stack counts as up
    ticks = process_start_ticks(os.getpid())
    assert ticks is not None
    me = ProcessHandle("zookeeper", os.getpid(), ticks, ("pytest",), str(state / "zk.log"))
    (state / "stack.json").write_text(
        json.dumps(
            {"services": [{"name": "zookeeper", "endpoint": "x", "ports": [1], "process": me.to_json()}]}
        )
    )
    with pytest.raises(DemoError, match=r"is already up \(zookeeper\).*lumber dev down --state-dir"):
        demo_in(state)._prepare_state_dir()
    assert (state / "stack.json").exists()


def test_the_warehouse_tree_folds_folders_of_files(tmp_path: Path) -> None:
    hour = tmp_path / "page_view" / "dt=2026-11-22" / "hr=08"
    hour.mkdir(parents=True)
    (hour / "page_view+0+0+10+0.parquet").write_bytes(b"x" * 1000)
    (hour / "page_view+1+0+12+0.parquet").write_bytes(b"x" * 1048)
    (hour / ".page_view+0+0+10+0.parquet.crc").write_bytes(b"c")
    meta = tmp_path / "_lumber" / "hourly"
    (meta / "staging").mkdir(parents=True)
    (meta / "CURRENT").write_text("{}")
    assert warehouse_tree(open_filesystem(str(tmp_path))) == [
        "├── page_view/",
        "│   └── dt=2026-11-22/",
        "│       └── hr=08/   2 files, 2.0 KiB   e.g. page_view+0+0+10+0.parquet",
        "└── _lumber/",
        "    └── hourly/",
        "        ├── CURRENT",
        "        └── staging/   (empty)",
    ]


def test_an_isr_is_shown_leader_first() -> None:
    assert isr_text((2, 0)) == "2,0"
    assert isr_text(()) == "-"


def test_tables_align_numbers_right() -> None:
    assert format_table(["host", "views", "avg"], [("app-1", 12_345, 451.0), ("app-10", 7, None)]) == [
        "host     views   avg",
        "------  ------  ----",
        "app-1   12,345   451",
        "app-10       7  NULL",
    ]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.hdfs
def test_a_small_demo_runs_end_to_end_through_a_broker_failover(tmp_path: Path) -> None:
    """``lumber demo --brokers 3 --hours 1`` on free ports: stack (with HDFS, the default), traffic with a
    kill -9 of the leader of page_view-0 mid-way (who took over, its restart, its return to every ISR), one
    spark-submit load, the audit (every window still COMPLETE), the tree and the query; the loaded counts
    are checked against the produced ones (the demo's own check)."""
    state = tmp_path / "demo"
    ports = dev_port_env(brokers=3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUMBER_")} | ports
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    config = config_from_mapping({}, env=ports)
    lumber = Path(sys.executable).parent / "lumber"
    try:
        done = subprocess.run(
            [
                str(lumber),  # as `make demo` runs it: every command the demo prints starts the same way
                "demo",
                "--brokers",
                "3",
                "--hours",
                "1",
                "--state-dir",
                str(state),
            ],
            capture_output=True,
            text=True,
            timeout=500,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        out = done.stdout
        assert done.returncode == 0, out[-6000:] + done.stderr[-3000:]
        assert (
            "[7/8] Querying the Parquet files as they are, with DuckDB (read from HDFS through fsspec and "
            "hdfs-native)" in out
        )
        warehouse = f"hdfs://127.0.0.1:{ports['LUMBER_DEV__HDFS_NAMENODE_PORT']}/warehouse"
        assert "[6/8] The warehouse on HDFS: Parquet files by topic, event-time day and hour" in out
        assert f"  {warehouse}/\n" in out
        assert "[8/8] Consumer groups left consuming page_view (one of each kind; dev down stops them)" in out
        assert re.search(r"zookeeper group 'demo-readers' consumes page_view \(pid \d+, log ", out)
        assert re.search(r"kafka group 'demo-dashboard' consumes page_view \(pid \d+, log ", out)
        assert "schema evolution: page_view-value version 2 registered" in out
        assert "committed manifest 1:" in out
        assert "6 quarantined" in out
        assert "every hour is COMPLETE" in out
        assert "INCOMPLETE" not in out
        # the failover: which broker died, who took over each partition it led, its return
        killed = re.search(
            r"kill -9 broker (\d+) \(pid (\d+)\) after [\d,]+ of [\d,]+ messages: "
            r"the leader of page_view-0\b",
            out,
        )
        assert killed, out[-6000:]
        victim, old_pid = int(killed[1]), int(killed[2])
        assert "ZooKeeper session (6 s) expired; the controller (broker " in out
        took_over = re.search(r"^ +page_view-0 +(\d+) +(\d+) +(\d+) +([\d,]+) +[\d.]+s$", out, re.MULTILINE)
        assert took_over, out[-6000:]
        assert int(took_over[1]) == victim
        assert int(took_over[2]) not in (victim, -1)
        assert int(took_over[3]) >= 1  # a new leader epoch
        assert str(victim) not in took_over[4].split(",")
        assert re.search(
            rf"restarting broker {victim} the way `{re.escape(str(lumber))} dev up` started it", out
        )
        assert f"$ {lumber} --config demo/lumber.toml broker start --id {victim} " in out
        assert re.search(rf"broker {victim} is up again \(pid \d+\)", out)
        assert re.search(rf"broker {victim} caught up and is back in the ISR of all \d+ partitions", out)
        assert "messages confirmed by every in-sync replica (acks=all, at least 2 copies)" in out
        assert "ok: page_view" in out
        assert "ok: click" in out
        assert "ok: search" in out
        assert f"{lumber} dev down --state-dir demo " in out  # relative to the working directory
        assert f"$ {lumber} dev up --hdfs --brokers 3 --state-dir demo" in out
        assert f"Stop it with:  {lumber} dev down --state-dir demo" in out  # printed by `dev up` itself
        # the demo ends with the console's URL, the stack behind it: its cluster page lists the demo's topics
        console_url = f"http://127.0.0.1:{ports['LUMBER_DEV__CONSOLE_PORT']}/"
        assert f"The web console (part of the stack): {console_url} " in out
        cluster_page = httpx.get(console_url, params={"format": "json"}, timeout=60)
        assert cluster_page.status_code == 200, cluster_page.text
        assert {"page_view", "click", "search"} <= {t["topic"] for t in cluster_page.json()["topics"]}
        # a command (`lumber etl run: ...` is a message prefix): none without the lumber that was run
        bare = [
            line for line in out.splitlines() if re.search(r"(^|[\s`$])lumber [a-z]+ [a-z-]+\b(?!:)", line)
        ]
        assert bare == []
        # the config the stack wrote describes it: broker 0's log dir is where its data is; every broker
        # holds a replica of every partition; the demo's short session timeout
        stack = load_config(state / "lumber.toml", env={})
        assert stack.log.log_dirs == [str(state / "broker-0" / "logs")]
        assert stack.broker.default_replication_factor == 3
        assert stack.zookeeper.session_timeout_ms == 6000
        for broker in range(3):
            assert (state / f"broker-{broker}" / "logs" / "page_view-0").is_dir()
        assert (state / "audit.html").is_file()
        assert stack.load.warehouse_url == warehouse
        errors = open_filesystem(warehouse).list_files(f"{warehouse}/_errors/page_view")
        assert errors
        assert all(info.name.endswith(".parquet") for info in errors)
        # the stack keeps running after the demo, the restarted broker recorded in stack.json
        services = {s["name"]: s for s in DevStack(config, state).summary()["services"]}
        assert all(s["running"] for s in services.values()), services
        assert services[f"broker-{victim}"]["pid"] != old_pid
        # the groups the demo left consuming: listed by `groups list`, stopped by `dev down` below
        assert {"group-demo-readers", "group-demo-dashboard"} <= set(services)
        listed = subprocess.run(
            [str(lumber), "--config", str(state / "lumber.toml"), "groups", "list", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert sorted((g["group"], g["kind"], g["members"]) for g in json.loads(listed.stdout)) == [
            ("demo-dashboard", "kafka", 1),
            ("demo-readers", "zookeeper", 1),
        ]
    finally:
        recorded = DevStack(config, state).read_state()
        DevStack(config, state).down()
        assert not [s.name for s in recorded if s.process.is_running()], "dev down left a process running"
