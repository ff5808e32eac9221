"""How long a ``lumber`` command takes from exec to exit (issue 40): the time a user waits for an answer.

Run from the repository root::

    .venv/bin/python bench/cli_startup.py              # 15 runs of each command, a 1-broker stack of its own
    .venv/bin/python bench/cli_startup.py --runs 5
    .venv/bin/python bench/cli_startup.py --baseline-repo /path/to/other/checkout   # its rows alternated in

It starts a dev stack (``lumber dev up``, 1 broker, in a temporary state dir, on free ports), creates a topic
of 3 partitions, then runs each command ``--runs`` times as a user does (``.venv/bin/lumber ...``, a new
process each time), alternating the commands, and prints the median and the spread of the wall-clock
times, with the goals: ``lumber --version`` and ``lumber --help`` under 0.15 s, ``lumber topics list``
under 0.4 s. The baseline row is ``python -c pass`` (the interpreter's own start) in the same sitting; the
machine may be shared, so read the rows against it. With ``--baseline-repo`` the same commands also run
from that checkout's code (``PYTHONPATH``; e.g. main before a change), alternated with this one's, each row
marked with its tree. The ``cpu s`` column is the median CPU time (user + system) of a run, which a
shared machine changes less than the wall clock: the goals are judged on the wall clock. The stack is
stopped at the end (``lumber dev down``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lumber.dev.process import free_port  # noqa: E402

LUMBER = str(Path(sys.executable).parent / "lumber")
#: (row name, argv, goal in seconds or None)
COMMANDS: tuple[tuple[str, list[str], float | None], ...] = (
    ("python -c pass", [sys.executable, "-c", "pass"], None),
    ("lumber --version", [LUMBER, "--version"], 0.15),
    ("lumber --help", [LUMBER, "--help"], 0.15),
    ("lumber topics list", [LUMBER, "topics", "list"], 0.4),
    ("lumber topics describe bench", [LUMBER, "topics", "describe", "bench"], None),
    ("lumber groups list", [LUMBER, "groups", "list"], None),
)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds: user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline-repo", type=Path, help="also time the commands from this checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        state_dir = Path(tmp) / "stack"
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "LUMBER_DEV__ZOOKEEPER_PORT": str(free_port()),
            "LUMBER_DEV__REGISTRY_PORT": str(free_port()),
            "LUMBER_DEV__BROKER_PORT": str(free_port()),
            "LUMBER_DEV__BROKER_METRICS_PORT": str(free_port()),
            "LUMBER_DEV__CONSOLE_PORT": str(free_port()),
            "LUMBER_DEV__LAG_EXPORTER_PORT": str(free_port()),
        }
        env.pop("LUMBER_CONFIG", None)
        up = [LUMBER, "dev", "up", "--state-dir", str(state_dir), "--brokers", "1"]
        subprocess.run(up, env=env, check=True, cwd=tmp, stdout=subprocess.DEVNULL)
        try:
            env["LUMBER_CONFIG"] = str(state_dir / "lumber.toml")
            create = [LUMBER, "topics", "create", "bench", "--partitions", "3"]
            subprocess.run(create, env=env, check=True, cwd=tmp, stdout=subprocess.DEVNULL)
            trees = [("", env)]
            if args.baseline_repo is not None:
                trees.append(
                    (f"[{args.baseline_repo.name}] ", {**env, "PYTHONPATH": str(args.baseline_repo)})
                )
            rows = [
                (tree + name, argv, goal, tree_env)
                for tree, tree_env in trees
                for name, argv, goal in COMMANDS
            ]
            times: dict[str, list[float]] = {name: [] for name, _, _, _ in rows}
            cpu: dict[str, list[float]] = {name: [] for name, _, _, _ in rows}
            for _ in range(args.runs):
                for name, argv, _, tree_env in rows:
                    wall, used = timed(argv, tree_env)
                    times[name].append(wall)
                    cpu[name].append(used)
        finally:
            env.pop("LUMBER_CONFIG", None)
            down = [LUMBER, "dev", "down", "--state-dir", str(state_dir)]
            subprocess.run(down, env=env, check=False, cwd=tmp, stdout=subprocess.DEVNULL)
    print(f"{'command':40} {'median s':>9} {'min s':>7} {'max s':>7} {'cpu s':>7}  goal")
    for name, _, goal, _ in rows:
        runs = times[name]
        met = goal is not None and statistics.median(runs) < goal
        verdict = "" if goal is None else f"< {goal} s: {'met' if met else 'MISSED'}"
        spread = f"{min(runs):7.3f} {max(runs):7.3f} {statistics.median(cpu[name]):7.3f}"
        print(f"{name:40} {statistics.median(runs):9.3f} {spread}  {verdict}")
    print(f"({args.runs} runs each, alternated, {time.strftime('%Y-%m-%d %H:%M')})")


if __name__ == "__main__":
    main()
