"""What ``lumber dev status`` says of each broker beyond "its process exists": is it running or frozen, is
it registered in ZooKeeper, is it in the ISR of every partition it replicates.

A process can be alive and useless: stopped by SIGSTOP (a debugger, a ``kill -STOP``, a paused container)
it holds its port, the kernel still accepts connections for it, and nothing answers; a broker whose
ZooKeeper session expired (a long GC pause, a network cut) runs on while the cluster has dropped it, and
its partitions lead and replicate elsewhere. :class:`StackHealth` reads the process state from
``/proc/<pid>/stat`` (``T``: stopped by a signal, ``t``: stopped by a tracer), the registration from
``/brokers/ids/<id>``, and each partition's ISR from its state znode
(:mod:`broker.cluster.zk_paths`), as ``lumber topics describe`` does.

One :class:`BrokerHealth` per broker service (``broker-<id>``); ``None`` fields are unknown (ZooKeeper not
answering within the connect timeout, which :class:`StackHealth` then names in :attr:`StackHealth.problem`).
A read-only observer: it writes nothing and holds its ZooKeeper session only while it reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster import zk_paths
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.zookeeper_auth import new_zookeeper_client

#: /proc/<pid>/stat states of a process stopped by a signal or a tracer
STOPPED_STATES = ("T", "t")


@dataclass(frozen=True)
class BrokerHealth:
    """One broker as the cluster sees it (see the module docstring)."""

    broker_id: int
    #: "running", "frozen" (stopped by a signal) or "not running"
    process: str
    #: /brokers/ids/<id> exists (None: ZooKeeper did not answer)
    registered: bool | None
    #: partitions this broker replicates (None: unknown)
    replicas: int | None
    #: of those, the ones whose ISR holds it
    in_isr: int | None

    @property
    def healthy(self) -> bool:
        return self.process == "running" and self.registered is True and self.in_isr == self.replicas

    def text(self) -> str:
        """``running, registered, in 4 of 4 ISRs``; what is wrong in capitals."""
        process = {"frozen": "FROZEN (stopped by a signal: SIGSTOP?)", "not running": "NOT running"}
        parts = [process.get(self.process, self.process)]
        if self.registered is None:
            parts.append("registration unknown")
        else:
            parts.append("registered" if self.registered else "NOT registered in ZooKeeper")
        if self.replicas is not None and self.in_isr is not None:
            if self.in_isr == self.replicas:
                parts.append(f"in {self.in_isr} of {self.replicas} ISRs")
            else:
                parts.append(f"NOT in every ISR: in {self.in_isr} of {self.replicas}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {
            "process": self.process,
            "registered": self.registered,
            "replicas": self.replicas,
            "in_isr": self.in_isr,
            "healthy": self.healthy,
        }


class StackHealth:
    """The brokers' health of a dev stack (see the module docstring)."""

    def __init__(self, zookeeper_connect: str, connect_timeout_s: float = 3.0) -> None:
        self.zookeeper_connect = zookeeper_connect
        self.connect_timeout_s = connect_timeout_s
        #: why some fields are unknown ("" when ZooKeeper answered)
        self.problem = ""

    def brokers(self, brokers: Iterable[tuple[int, int, bool]]) -> dict[int, BrokerHealth]:
        """``(broker id, pid, process alive)`` of each broker service -> its health."""
        listed = list(brokers)
        registered: dict[int, bool] = {}
        replicas: dict[int, int] = {}
        in_isr: dict[int, int] = {}
        known = self._read_cluster({broker_id for broker_id, _, _ in listed}, registered, replicas, in_isr)
        return {
            broker_id: BrokerHealth(
                broker_id,
                _process_state(pid, alive),
                registered.get(broker_id) if known else None,
                replicas.get(broker_id, 0) if known else None,
                in_isr.get(broker_id, 0) if known else None,
            )
            for broker_id, pid, alive in listed
        }

    def _read_cluster(
        self,
        broker_ids: set[int],
        registered: dict[int, bool],
        replicas: dict[int, int],
        in_isr: dict[int, int],
    ) -> bool:
        client = new_zookeeper_client(hosts=self.zookeeper_connect, timeout=self.connect_timeout_s)
        try:
            client.start(timeout=self.connect_timeout_s)
        except (KazooTimeoutError, KazooException) as exc:
            self.problem = f"ZooKeeper {self.zookeeper_connect} did not answer ({exc!r})"
            with contextlib.suppress(KazooException):
                client.close()
            return False
        try:
            for broker_id in broker_ids:
                registered[broker_id] = client.exists(zk_paths.broker_path(broker_id)) is not None
            admin = TopicAdmin(client)
            for topic in admin.list_topics():
                assignment = admin.describe_topic(topic)
                states = admin.describe_states(topic)
                for partition, partition_replicas in assignment.items():
                    state = states.get(partition)
                    for broker_id in partition_replicas:
                        replicas[broker_id] = replicas.get(broker_id, 0) + 1
                        if state is not None and broker_id in state.isr:
                            in_isr[broker_id] = in_isr.get(broker_id, 0) + 1
        except KazooException as exc:
            self.problem = f"ZooKeeper {self.zookeeper_connect}: {exc!r}"
            return False
        finally:
            client.stop()
            client.close()
        return True


def _process_state(pid: int, alive: bool) -> str:
    if not alive:
        return "not running"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "not running"
    state = stat[stat.rindex(")") + 2 :].split()[0]
    return "frozen" if state in STOPPED_STATES else "running"
