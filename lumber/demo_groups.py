"""The demo's last stack services: two consumer groups left consuming, so that ``lumber groups list``, the
lag exporter, ``groups lag`` and the console's groups pages have groups to show after the demo.

One group of each kind reads page_view as a ``lumber consume --group`` process (committing as it goes):

* ``demo-readers`` (``--kind zookeeper``): the paper's groups, coordinated in ZooKeeper;
* ``demo-dashboard`` (``--kind kafka``): Kafka's group protocol, coordinated by a broker.

Both start at the log end (``auto.offset.reset`` latest: only new traffic) and print what they read to
their own log (``<state_dir>/groups/<group>.log``). Each is recorded in ``stack.json`` as a service of the
stack (named ``group-<group>``), appended as :mod:`lumber.demo_failover` records a restarted broker, so
``lumber dev down`` stops them with the rest, and ``dev status`` lists them. :class:`DemoGroups` waits
until each group has its member (ZooKeeper's ``/consumers/<group>/ids``, the coordinator's
DescribeGroups).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from kazoo.client import KazooClient

from broker.client.groups.kafka.kafka_group_admin import KafkaGroupAdmin
from broker.client.groups.zookeeper.group_admin import GroupAdmin
from lumber.config import LumberConfig
from lumber.dev.dev_stack import DevStack, ServiceState
from lumber.dev.process import ProcessHandle, start_and_wait

#: (group, kind) of the groups the demo leaves consuming page_view
GROUPS = (("demo-readers", "zookeeper"), ("demo-dashboard", "kafka"))
TOPIC = "page_view"
START_TIMEOUT_S = 60.0


class DemoGroups:
    """Starts the demo's groups as recorded stack services (see the module docstring)."""

    def __init__(
        self, stack: LumberConfig, state_dir: Path, lumber_argv: Sequence[str], env: dict[str, str]
    ) -> None:
        self.stack = stack
        self.state_dir = state_dir
        self.lumber_argv = list(lumber_argv)
        self.env = env

    def start(self, say: Callable[[str], None]) -> list[ProcessHandle]:
        started = []
        for group, kind in GROUPS:
            argv = [*self.lumber_argv, "consume", TOPIC, "--group", group, "--kind", kind]
            log_path = self.state_dir / "groups" / f"{group}.log"
            handle, _ = start_and_wait(
                f"group-{group}",
                argv,
                log_path,
                functools.partial(self._has_member, group, kind),
                START_TIMEOUT_S,
                on_spawned=functools.partial(self._record, f"group-{group}"),
                env=self.env,
            )
            say(f"  {kind} group {group!r} consumes {TOPIC} (pid {handle.pid}, log {log_path})")
            started.append(handle)
        return started

    def _has_member(self, group: str, kind: str) -> bool:
        if kind == "zookeeper":
            client = KazooClient(hosts=self.stack.zookeeper.connect, timeout=5)
            client.start(timeout=5)
            try:
                return len(GroupAdmin(client).members(group)) > 0
            finally:
                client.stop()
                client.close()
        with KafkaGroupAdmin(
            zookeeper_connect=self.stack.zookeeper.connect, config=self.stack.consumer
        ) as admin:
            return admin.exists(group) and len(admin.members(group)) > 0

    def _record(self, name: str, handle: ProcessHandle) -> None:
        """Append the service to ``stack.json`` (``dev down`` stops every recorded process)."""
        stack = DevStack(self.stack, self.state_dir)
        raw = json.loads(stack.state_path.read_text())
        raw["services"] = [s.to_json() for s in stack.read_state() if s.name != name] + [
            ServiceState(name, "-", (), handle).to_json()
        ]
        tmp = stack.state_path.with_suffix(".json.demo-tmp")
        tmp.write_text(json.dumps(raw, indent=2) + "\n")
        tmp.replace(stack.state_path)
