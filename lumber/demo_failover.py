"""Step 3 of ``lumber demo`` (:mod:`lumber.demo`): a broker's failover mid-traffic (issue 19).

Once a share of the traffic was handed to the producers, the broker leading page_view-0
(:data:`KILL_LEADER_OF`) is killed with ``kill -9``, by the pid the dev stack recorded; while the traffic goes
on, a thread prints who took over each partition it led and when (the controller elects from the ISR once
the dead broker's ZooKeeper session expires), restarts it as ``lumber dev up`` started it (recording the new
pid in ``stack.json``, so that ``lumber dev down`` stops it), and waits until it is back in every ISR.
Every wait is bounded and a timeout names what it waited for. Not thread-safe: the demo's thread calls
:meth:`BrokerFailover.maybe_kill` and :meth:`BrokerFailover.wait`; the failover's own thread does the rest.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from kazoo.client import KazooClient

from broker.cluster import zk_reads
from broker.cluster.partition_state import NO_LEADER, PartitionState
from broker.cluster.topic_admin import TopicAdmin
from lumber.config import LumberConfig
from lumber.demo_errors import DemoError
from lumber.demo_text import count_text, elapsed_text, format_table, isr_text
from lumber.dev.dev_stack import DevStack, ServiceState
from lumber.dev.process import ProcessHandle, kill, port_in_use, start_and_wait
from pipeline.errors import PipelineError

#: The broker killed is the leader of this partition of the first topic.
KILL_LEADER_OF = ("page_view", 0)


class DemoConsole(Protocol):
    """What the failover needs of the demo (:class:`lumber.demo.Demo`): its output, paths and commands."""

    state_dir: Path

    @property
    def lumber(self) -> str: ...

    @property
    def base_config_path(self) -> Path: ...

    def say(self, line: str = "") -> None: ...

    def child_env(self, config_path: Path) -> dict[str, str]: ...

    def shown_command(self, argv: Sequence[str]) -> str: ...


class BrokerFailover:
    """Step 3's failover: ``kill -9`` of the leader of page_view-0 once ``kill_at`` messages were handed to
    the producers (:meth:`maybe_kill`, from the traffic's loop); then, in a thread while the traffic goes on,
    who took over each partition it led and when, its restart as ``lumber dev up`` started it, and its
    return to every ISR. :meth:`wait` joins the thread (bounded) and raises what went wrong as
    :class:`DemoError`."""

    POLL_S = 0.1

    def __init__(self, demo: DemoConsole, stack: LumberConfig, topics: Sequence[str], kill_at: int) -> None:
        self.demo = demo
        self.stack = stack
        self.topics = list(topics)
        self.kill_at = kill_at
        self.session_s = stack.zookeeper.session_timeout_ms / 1000
        #: how long the controller may take to move the partitions (and the ISR changes to be written)
        self.takeover_bound_s = self.session_s + stack.broker.replica_lag_time_max_ms / 1000 + 20
        self.start_bound_s = stack.dev.start_timeout_ms / 1000
        #: how long the restarted broker may take to catch up and rejoin every ISR
        self.rejoin_bound_s = stack.broker.replica_lag_time_max_ms / 1000 + 60
        self._zk: KazooClient | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _client(self) -> KazooClient:
        if self._zk is None:
            zk = KazooClient(hosts=self.stack.zookeeper.connect, timeout=self.session_s)
            zk.start(timeout=self.stack.zookeeper.connect_timeout_ms / 1000)
            self._zk = zk
        return self._zk

    def _admin(self) -> TopicAdmin:
        return TopicAdmin(self._client())

    def _states(self) -> dict[str, PartitionState]:
        """``topic-p`` -> state, over the failover's topics."""
        admin = self._admin()
        return {
            f"{topic}-{p}": state
            for topic in self.topics
            for p, state in admin.describe_states(topic).items()
        }

    def maybe_kill(self, handed: int, total: int) -> None:
        """Kill the leader of page_view-0 when ``handed`` reaches ``kill_at`` (once), and start following."""
        if self._thread is not None or handed < self.kill_at:
            return
        states = self._states()
        victim = states["{}-{}".format(*KILL_LEADER_OF)].leader
        controller = zk_reads.read_controller(self._client())
        assignment = {
            f"{topic}-{p}": replicas
            for topic in self.topics
            for p, replicas in self._admin().describe_topic(topic).items()
        }
        replicas = {name for name, rs in assignment.items() if victim in rs}
        # a partition whose only replica is the victim (a user's replication factor 1) has no one to take
        # over: it is offline until the restart
        led = [n for n, state in states.items() if state.leader == victim and len(assignment[n]) > 1]
        alone = sorted(n for n in replicas if len(assignment[n]) == 1)
        name = f"broker-{victim}"
        service = next(
            (s for s in DevStack(self.stack, self.demo.state_dir).read_state() if s.name == name), None
        )
        if service is None or not service.process.is_running():
            raise DemoError(f"{name}, the leader of page_view-0, is not a running process of the stack")
        kill(service.process)
        killed_at = time.monotonic()
        also = " and the controller" if controller == victim else f"; the controller is broker {controller}"
        self.demo.say(
            f"  kill -9 broker {victim} (pid {service.process.pid}) after {count_text(handed)} of "
            f"{count_text(total)} messages: the leader of {', '.join(led)}{also}"
        )
        if alone:
            self.demo.say(f"  ({', '.join(alone)}: no other replica, offline until broker {victim} is back)")
        self._thread = threading.Thread(
            target=self._follow,
            args=(victim, led, replicas - set(alone), service, killed_at),
            name=f"demo-failover-{victim}",
            daemon=True,
        )
        self._thread.start()

    def _follow(
        self, victim: int, led: list[str], replicas: set[str], service: ServiceState, killed_at: float
    ) -> None:
        try:
            self._takeover(victim, led, replicas, killed_at)
            restarted_at = self._restart(victim, service, killed_at)
            self._rejoin(victim, replicas, killed_at, restarted_at)
        except BaseException as exc:  # noqa: BLE001 - handed to wait(), in the demo's thread
            self._error = exc

    def _takeover(self, victim: int, led: list[str], replicas: set[str], killed_at: float) -> None:
        """Wait until every partition ``victim`` led has another leader and it is in no ISR; say who."""
        moved: dict[str, float] = {}
        while True:
            states = self._states()
            now = time.monotonic() - killed_at
            for name in led:
                if name not in moved and states[name].leader not in (victim, NO_LEADER):
                    moved[name] = now
            still_in = sorted(n for n in replicas if victim in states[n].isr)
            if len(moved) == len(led) and not still_in:
                break
            if now > self.takeover_bound_s:
                waiting = [f"{n} (leader {states[n].leader})" for n in led if n not in moved]
                raise DemoError(
                    f"timed out after {self.takeover_bound_s:.0f} s waiting for the controller to move the "
                    f"partitions broker {victim} led to other brokers (not yet: "
                    f"{', '.join(waiting) or 'none'}) and to take it out of every ISR (still in: "
                    f"{', '.join(still_in) or 'none'})"
                )
            time.sleep(self.POLL_S)
        controller = zk_reads.read_controller(self._client())
        self.demo.say(
            f"  +{elapsed_text(max(moved.values(), default=now))}  broker {victim}'s ZooKeeper session "
            f"({self.session_s:g} s) expired; the controller (broker {controller}) elected new leaders from "
            f"the ISR for the {len(led)} partition{'s' if len(led) != 1 else ''} it led:"
        )
        rows = [
            (
                name,
                victim,
                states[name].leader,
                states[name].leader_epoch,
                isr_text(states[name].isr),
                elapsed_text(moved[name]),
            )
            for name in led
        ]
        for line in format_table(
            ["partition", "was led by", "now led by", "leader epoch", "ISR", "after"], rows
        ):
            self.demo.say(f"      {line}")

    def _restart(self, victim: int, service: ServiceState, killed_at: float) -> float:
        """Start the broker again with the argv ``dev up`` gave it, record its new pid in ``stack.json``
        (so ``dev down`` stops it) and wait until it is registered in ZooKeeper and accepts connections."""
        stack = DevStack(self.stack, self.demo.state_dir)
        old = service.process
        self.demo.say(
            f"  +{elapsed_text(time.monotonic() - killed_at)}  restarting broker {victim} the way "
            f"`{self.demo.lumber} dev up` started it:"
        )
        self.demo.say(f"  $ {self.demo.shown_command(old.argv)}")

        def record(handle: ProcessHandle) -> None:
            raw = json.loads(stack.state_path.read_text())
            raw["services"] = [
                (dataclasses.replace(s, process=handle) if s.name == service.name else s).to_json()
                for s in stack.read_state()
            ]
            tmp = stack.state_path.with_suffix(".json.demo-tmp")
            tmp.write_text(json.dumps(raw, indent=2) + "\n")
            tmp.replace(stack.state_path)

        def registered() -> bool:
            return victim in self._admin().live_brokers() and port_in_use(service.ports[0])

        restarted_at = time.monotonic()
        handle, _ = start_and_wait(
            service.name,
            old.argv,
            Path(old.log_path),
            registered,
            self.start_bound_s,
            on_spawned=record,
            env=self.demo.child_env(self.demo.base_config_path),
        )
        self.demo.say(
            f"  +{elapsed_text(time.monotonic() - killed_at)}  broker {victim} is up again "
            f"(pid {handle.pid}), registered in ZooKeeper; it follows the new leaders"
        )
        return restarted_at

    def _rejoin(self, victim: int, replicas: set[str], killed_at: float, restarted_at: float) -> None:
        """Wait until ``victim`` is back in the ISR of every partition it holds a replica of; say so."""
        while True:
            states = self._states()
            missing = sorted(n for n in replicas if victim not in states[n].isr)
            if not missing:
                break
            if time.monotonic() - restarted_at > self.rejoin_bound_s:
                raise DemoError(
                    f"timed out after {self.rejoin_bound_s:.0f} s waiting for the restarted broker "
                    f"{victim} to be back in every ISR (not yet in: {', '.join(missing)})"
                )
            time.sleep(self.POLL_S)
        now = time.monotonic()
        self.demo.say(
            f"  +{elapsed_text(now - killed_at)}  broker {victim} caught up and is back in the ISR of all "
            f"{len(replicas)} partitions ({elapsed_text(now - restarted_at)} after its restart); its old "
            f"partitions keep their new leaders until `{self.demo.lumber} topics elect-leaders` "
            f"(or the controller's next preferred-leader check)"
        )

    def wait(self) -> None:
        """Join the thread (bounded); raise :class:`DemoError` if the failover failed or never happened."""
        if self._thread is None:
            raise DemoError(f"the failover never started: fewer than {self.kill_at} messages were sent")
        bound = self.takeover_bound_s + self.start_bound_s + self.rejoin_bound_s + 30
        self._thread.join(timeout=bound)
        if self._thread.is_alive():
            raise DemoError(f"the failover did not finish within {bound:.0f} s")
        if self._error is not None:
            if isinstance(self._error, DemoError | PipelineError):
                raise DemoError(f"failover: {self._error}") from self._error
            raise DemoError(f"failover: {type(self._error).__name__}: {self._error}") from self._error

    def close(self) -> None:
        """Close the ZooKeeper session (after :meth:`wait`, or when the demo gives up)."""
        if self._thread is not None and self._thread.is_alive():
            return  # the thread still uses it; it ends with the process (a daemon thread)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
