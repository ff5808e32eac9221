"""``lumber dev up|status|down``: the local stack of real services on 127.0.0.1.

``--json`` prints :meth:`lumber.dev.dev_stack.DevStack.summary`: ``bootstrap_servers``,
``zookeeper_connect``, ``registry_url``, ``console_url``, ``lag_exporter_url``, ``warehouse_url`` and
``webhdfs_url`` at the top, then every service. ``up --hdfs`` also starts HDFS and keeps the warehouse
there. ``up --secure`` also gives the brokers SASL_SSL listeners (:mod:`lumber.dev.dev_security`); its
summary's ``secure`` holds the client settings (``listeners`` as ``SASL_SSL://host:port``, ``ssl_cafile``,
``sasl_username``, ``sasl_password_file``, and with ``up --json`` the ``sasl_password``). The commands the
output suggests (``dev down`` with the same ``--state-dir`` and ``--config``) work as printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumber.cli.invocation import suggest
from lumber.dev.dev_stack import DevStack
from pipeline.errors import DevStackError

if TYPE_CHECKING:
    from lumber.config import LumberConfig


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("dev", help="start, inspect and stop the local stack (ZooKeeper, ...)")
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    up = sub.add_parser("up", help="start the stack in the background and wait until it is ready")
    _common(up)
    up.add_argument("--brokers", type=int, help="how many brokers to start (default: [dev] brokers, 1)")
    up.add_argument(
        "--hdfs",
        action="store_true",
        help="also start HDFS (a NameNode and a DataNode) and keep the warehouse there ([dev] hdfs)",
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="also give the brokers a SASL_SSL listener (a generated CA and certificate, a SCRAM-SHA-512 "
        "user) and print the client settings ([dev] secure)",
    )
    up.set_defaults(handler=_up)

    status = sub.add_parser("status", help="report what the stack runs")
    _common(status)
    status.set_defaults(handler=_status)

    down = sub.add_parser("down", help="stop exactly the processes `dev up` started")
    _common(down)
    down.add_argument("--purge", action="store_true", help="also delete the state dir (data and logs)")
    down.set_defaults(handler=_down)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir", type=Path, help="pids, ports, data and logs (default: [dev] state_dir)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def _stack(args: argparse.Namespace, config: LumberConfig) -> DevStack:
    return DevStack(config, args.state_dir)


def _down_command(args: argparse.Namespace) -> str:
    """``lumber dev down`` for the stack ``args`` name, as the user types it."""
    return suggest(args, "dev", "down", *(("--state-dir", args.state_dir) if args.state_dir else ()))


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(f"state dir:  {summary['state_dir']}")
    for service in summary["services"]:
        state = service.get("status") or ("running" if service["running"] else "NOT running")
        print(f"  {service['name']:<12} {service['endpoint']:<22} pid {service['pid']:<8} {state}")
    if not summary["services"]:
        print("  (nothing is running)")


def _up(args: argparse.Namespace, config: LumberConfig) -> int:
    if args.brokers is not None:
        if not 0 <= args.brokers <= 64:
            raise DevStackError(f"--brokers {args.brokers}: give 0 to 64 brokers")
        config = config.replace(dev=config.dev.replace(brokers=args.brokers))
    if args.hdfs:
        config = config.replace(dev=config.dev.replace(hdfs=True))
    if args.secure:
        config = config.replace(dev=config.dev.replace(secure=True))
    stack = _stack(args, config)
    progress = (lambda _msg: None) if args.json else (lambda msg: print(f"... {msg}", file=sys.stderr))
    summary = stack.up(progress=progress, down_command=_down_command(args))
    _print_summary(summary, args.json)
    if not args.json:
        print(f"\nZooKeeper: {summary['zookeeper_connect']}")
        print(f"Brokers:   {','.join(summary['bootstrap_servers']) or '(none)'}")
        print(f"Registry:  {summary['registry_url']}")
        print(f"Console:   {summary['console_url']}")
        if summary["lag_exporter_url"]:
            print(f"Lag exporter: {summary['lag_exporter_url']}/metrics")
        print(f"Warehouse: {summary['warehouse_url']}")
        if summary["webhdfs_url"]:
            print(f"WebHDFS:   {summary['webhdfs_url']}")
        print(f"Point other commands at this stack with:  export LUMBER_CONFIG={summary['config_path']}")
        secure = summary.get("secure")
        if secure:
            print(f"\nSASL_SSL:  {','.join(secure['listeners'])}  ({secure['sasl_mechanism']})")
            print(f"  sasl_username = {secure['sasl_username']}")
            print(
                f"  sasl_password_file = {secure['sasl_password_file']}  (the password; `--json` prints it)"
            )
            print(f"  ssl_cafile = {secure['ssl_cafile']}")
            print(f"Every Lumber client on SASL_SSL:  export LUMBER_CONFIG={secure['config_path']}")
        print(f"Stop it with:  {_down_command(args)}")
    return 0


def _status(args: argparse.Namespace, config: LumberConfig) -> int:
    """Each service's process; each broker's too as the cluster sees it (:mod:`lumber.dev.stack_health`):
    frozen, registered, in every ISR. Exit 0 only when all is well."""
    from lumber.dev.stack_health import StackHealth

    summary = _stack(args, config).summary()
    services = summary["services"]
    brokers = [
        (int(s["name"].removeprefix("broker-")), s["pid"], s["running"])
        for s in services
        if s["name"].startswith("broker-")
    ]
    health = StackHealth(summary["zookeeper_connect"]) if brokers else None
    found = health.brokers(brokers) if health is not None else {}
    for service in services:
        name = service["name"]
        broker = found.get(int(name.removeprefix("broker-"))) if name.startswith("broker-") else None
        if broker is not None:
            service.update(broker.to_json())
            service["status"] = broker.text()
    _print_summary(summary, args.json)
    if health is not None and health.problem and not args.json:
        print(f"  (broker registration and ISRs unknown: {health.problem})")
    healthy = all(s["running"] for s in services) and all(b.healthy for b in found.values())
    return 0 if services and healthy else 1


def _down(args: argparse.Namespace, config: LumberConfig) -> int:
    progress = (lambda _msg: None) if args.json else (lambda msg: print(f"... {msg}", file=sys.stderr))
    stopped = _stack(args, config).down(purge=args.purge, progress=progress)
    if args.json:
        print(json.dumps({"stopped": stopped}))
    elif not stopped:
        print("nothing was running")
    return 0
