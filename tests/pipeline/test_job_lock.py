from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.etl_zk_paths import job_lock_path
from pipeline.job_lock import JobLock, dead_holder_pid, pid_alive
from pipeline.load_errors import JobLockedError
from tests.support.zookeeper import expire_session, new_client


def test_a_second_run_is_refused_naming_the_holder(zk: Any, zk_connect: str) -> None:
    other = new_client(zk_connect)
    try:
        with JobLock(zk, "hourly", "hostA pid 1 run r1") as first:
            first.ensure_held()
            assert zk.get_children(job_lock_path("hourly"))
            second = JobLock(other, "hourly", "hostB pid 2 run r2")
            with pytest.raises(JobLockedError) as caught:
                second.acquire()
            message = str(caught.value)
            assert "load job 'hourly' is already running" in message
            assert "hostA pid 1 run r1" in message
            assert "/etl/jobs/hourly/lock" in message
            # a waiting run gives up after its timeout
            with pytest.raises(JobLockedError):
                JobLock(other, "hourly", "hostC", timeout_s=0.3).acquire()
            # another job is independent
            with JobLock(other, "nightly", "hostB pid 2 run r3"):
                pass
        # released: the next run gets it, and its contender nodes are gone
        with JobLock(other, "hourly", "hostB pid 2 run r4") as third:
            assert third.holders() == ["hostB pid 2 run r4"]
    finally:
        other.stop()
        other.close()


def test_a_lost_session_forbids_the_commit(zk_connect: str) -> None:
    client = new_client(zk_connect)
    try:
        lock = JobLock(client, "hourly", "hostA")
        lock.acquire()
        expire_session(client, zk_connect)
        with pytest.raises(JobLockedError, match="session was lost"):
            lock.ensure_held()
        lock.release()
        with pytest.raises(JobLockedError, match="not held"):
            lock.ensure_held()
    finally:
        client.stop()
        client.close()


HOLDER = """
import socket, sys, time
from kazoo.client import KazooClient
from pipeline.job_lock import JobLock, contender_identifier
client = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[2]))
client.start(timeout=30)
JobLock(client, "hourly", contender_identifier("r-dead")).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_killed_holder_on_this_host_is_waited_out(zk: Any, zk_connect: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, zk_connect, "3.0"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        # its ephemeral node outlives it until its 3 s session expires
        assert zk.get_children(job_lock_path("hourly"))
        said: list[str] = []
        started = time.monotonic()
        with JobLock(zk, "hourly", "me", session_timeout_s=3.0, say=said.append) as lock:
            waited_s = time.monotonic() - started
            assert lock.holders() == ["me"]
        assert len(said) == 2, said
        identifier = f"{socket.gethostname()} pid {holder.pid} run r-dead"
        assert said[0] == (
            f"job 'hourly': the lock /etl/jobs/hourly/lock is held by {identifier}, but that process is gone "
            f"(pid {holder.pid} is not running on this host); its ZooKeeper session expires within 3 s: "
            "waiting up to 7 s for it"
        )
        assert said[1].startswith("job 'hourly': lock /etl/jobs/hourly/lock taken after ")
        assert 0.5 < waited_s < 7.0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_live_or_remote_holder_is_refused_at_once(zk: Any, zk_connect: str) -> None:
    other = new_client(zk_connect)
    try:
        for identifier in (
            f"{socket.gethostname()} pid {os.getpid()} run r1",  # alive: this very process
            "some-other-host pid 1 run r2",  # elsewhere: cannot be checked from here
            "not a contender identifier",
        ):
            with JobLock(other, "hourly", identifier):
                said: list[str] = []
                started = time.monotonic()
                with pytest.raises(JobLockedError, match=f"is held by {identifier}"):
                    JobLock(zk, "hourly", "me", say=said.append).acquire()
                assert time.monotonic() - started < 2.0
                assert said == []
    finally:
        other.stop()
        other.close()


def test_pid_alive_tells_a_zombie_from_a_running_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert not pid_alive(child.pid)  # exited, not yet reaped
    assert dead_holder_pid(f"{socket.gethostname()} pid {child.pid} run r") == child.pid
    child.wait()
    assert not pid_alive(child.pid)
    assert pid_alive(os.getpid())
    assert dead_holder_pid(f"{socket.gethostname()} pid {os.getpid()} run r") is None


def test_a_dead_holder_whose_session_outlives_the_wait_is_refused_saying_so(zk: Any, zk_connect: str) -> None:
    # the holder's session (30 s) is longer than this run expects (0.5 s + slack): it waits, then gives up
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, zk_connect, "30.0"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        said: list[str] = []
        with pytest.raises(JobLockedError) as caught:
            JobLock(zk, "hourly", "me", session_timeout_s=0.5, say=said.append).acquire()
        identifier = f"{socket.gethostname()} pid {holder.pid} run r-dead"
        message = str(caught.value)
        assert re.fullmatch(
            "load job 'hourly': the ZooKeeper lock /etl/jobs/hourly/lock is still held by "
            f"{re.escape(identifier)}"
            r" after waiting [45] s for a dead holder's session to expire; this run did not start",
            message,
        ), message
        assert len(said) == 1
        assert said[0].endswith("its ZooKeeper session expires within 0.5 s: waiting up to 4.5 s for it")
        # nothing of this run is left behind: only the dead holder's node
        assert len(zk.get_children(job_lock_path("hourly"))) == 1
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
