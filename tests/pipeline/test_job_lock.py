from __future__ import annotations

from typing import Any

import pytest

from pipeline.etl_zk_paths import job_lock_path
from pipeline.job_lock import JobLock
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
