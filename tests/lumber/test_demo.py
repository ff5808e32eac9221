"""``lumber demo``: its state-folder rules, its printing, and (slow) a small demo end to end."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lumber.config import LumberConfig, config_from_mapping, load_config
from lumber.demo import MARKER_FILE, Demo, DemoError, DemoOptions
from lumber.demo_text import format_table, warehouse_tree
from lumber.dev.dev_stack import DevStack
from lumber.dev.process import ProcessHandle, free_port, process_start_ticks


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
    assert warehouse_tree(tmp_path) == [
        "├── page_view/",
        "│   └── dt=2026-11-22/",
        "│       └── hr=08/   2 files, 2.0 KiB   e.g. page_view+0+0+10+0.parquet",
        "└── _lumber/",
        "    └── hourly/",
        "        ├── CURRENT",
        "        └── staging/   (empty)",
    ]


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
def test_a_small_demo_runs_end_to_end(tmp_path: Path) -> None:
    """``lumber demo --brokers 1 --hours 1`` on free ports: stack, traffic, one spark-submit load, the audit,
    the tree and the query; the loaded counts are checked against the produced ones (the demo's own check)."""
    state = tmp_path / "demo"
    ports = {
        "LUMBER_DEV__ZOOKEEPER_PORT": str(free_port()),
        "LUMBER_DEV__BROKER_PORT": str(free_port()),
        "LUMBER_DEV__REGISTRY_PORT": str(free_port()),
    }
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
                "1",
                "--hours",
                "1",
                "--state-dir",
                str(state),
            ],
            capture_output=True,
            text=True,
            timeout=400,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        out = done.stdout
        assert done.returncode == 0, out[-6000:] + done.stderr[-3000:]
        assert "[7/7] Querying the Parquet files as they are, with DuckDB" in out
        assert "schema evolution: page_view-value version 2 registered" in out
        assert "committed manifest 1:" in out
        assert "6 quarantined" in out
        assert "every hour is COMPLETE" in out
        assert "ok: page_view" in out
        assert "ok: click" in out
        assert "ok: search" in out
        assert f"{lumber} dev down --state-dir demo " in out  # relative to the working directory
        assert f"$ {lumber} dev up --brokers 1 --state-dir demo" in out
        assert f"Stop it with:  {lumber} dev down --state-dir demo" in out  # printed by `dev up` itself
        # a command (`lumber etl run: ...` is a message prefix): none without the lumber that was run
        bare = [
            line for line in out.splitlines() if re.search(r"(^|[\s`$])lumber [a-z]+ [a-z-]+\b(?!:)", line)
        ]
        assert bare == []
        # the config the stack wrote describes it: broker 0's log dir is where its data is
        stack = load_config(state / "lumber.toml", env={})
        assert stack.log.log_dirs == [str(state / "broker-0" / "logs")]
        assert (state / "broker-0" / "logs" / "page_view-0").is_dir()
        assert (state / "audit.html").is_file()
        assert list((state / "warehouse" / "_errors" / "page_view").glob("dt=*/hr=*/*.parquet"))
        assert DevStack(config, state).summary()["services"], "the stack should keep running after the demo"
    finally:
        DevStack(config, state).down()
