"""A load run dies with the ``lumber etl run`` (or scheduler) that started it, even a SIGKILLed one.

The process tree of one run::

    lumber etl run (Python)                     sets LUMBER_PARENT_PID=<its pid>@<host> for the run
     └── spark-submit -> spark-class -> java    (bash ``exec``\\s: one pid) -- (1) parent-death signal
          ├── python jobs/load.py               the driver: takes the job's lock, commits -- (2) and (3)
          └── python -m pyspark.daemon          Python workers: exit on EOF of their stdin from the JVM

SIGTERM and Ctrl-C of the CLI are forwarded (:mod:`pipeline.load_submit` stops the run's process group), but
SIGKILL cannot be, and spark-submit runs in a session of its own. So:

1. :func:`die_with_parent` prefixes spark-submit's command with util-linux ``setpriv --pdeathsig KILL``,
   which sets ``PR_SET_PDEATHSIG`` to SIGKILL and ``exec``\\s a ``sh`` that checks its parent and ``exec``\\s
   spark-submit: the signal survives ``exec`` and so covers the JVM. The signal is sent when the *thread*
   that forked the child ends, so the caller must wait for the run in that thread (as
   :func:`pipeline.load_submit.submit_load` does). If the parent died before the setting took effect, the
   ``sh`` kills itself at once. No Python runs between ``fork`` and ``exec`` (a ``preexec_fn`` did once:
   in a parent with many threads the child can deadlock on a lock another thread held at the fork).
2. :func:`watch_parent`, called first thing by the driver (``jobs/load.py``), sets the same signal for the
   driver itself: its parent is the JVM (Spark's ``PythonRunner`` starts it and waits for it), so the
   driver is SIGKILLed when the JVM dies, whoever killed it.
3. :func:`watch_parent` also watches the process named by ``LUMBER_PARENT_PID`` (the CLI) through a pidfd
   in a daemon thread and SIGKILLs the driver when it exits: the driver, which holds the lock and commits,
   goes within milliseconds even if the JVM lingers. The value names the host too: a driver that runs
   elsewhere (a cluster deploy mode that passed the environment on) does not watch a pid of another host.

A driver started by hand (no ``LUMBER_PARENT_PID``) gets (2) only. The driver dies by SIGKILL: no
``finally`` runs, the lock's ephemeral node stays until its ZooKeeper session expires, and the next run waits
that out (:mod:`pipeline.job_lock`); a run killed before its commit point committed nothing, one killed after
it is rolled forward by the next run's recovery (:mod:`pipeline.commit`).

Linux only (``prctl`` and ``pidfd_open``); elsewhere these are no-ops, as is (3) on kernels before 5.3.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence

#: The environment variable naming the process the driver must not outlive: ``<pid>@<host name>``.
PARENT_PID_ENV = "LUMBER_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's symbols, libc's among them
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


# loaded once, at import: (2) of the module docstring sets the signal for the driver itself
_PRCTL = _load_prctl()


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when the thread that forked it ends; False if
    unsupported."""
    if _PRCTL is None:
        return False
    return _PRCTL(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


#: Run by ``sh`` after setpriv set the death signal: ``$1`` is the parent's pid; gone already, die.
_CHECK_PARENT = 'test "$PPID" = "$1" || kill -KILL $$; shift; exec "$@"'


def die_with_parent(argv: Sequence[str], parent_pid: int) -> list[str]:
    """``argv`` run so that it dies with ``parent_pid`` (the caller's ``os.getpid()``), see (1) in the
    module docstring; ``argv`` unchanged where ``setpriv`` is missing (not Linux)."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv is None:
        return list(argv)
    shell = ["/bin/sh", "-c", _CHECK_PARENT, "sh", str(parent_pid)]
    return [setpriv, "--pdeathsig", "KILL", "--", *shell, *argv]


def parent_value(pid: int | None = None) -> str:
    """The value of :data:`PARENT_PID_ENV` naming ``pid`` (default: this process) on this host."""
    return f"{os.getpid() if pid is None else pid}@{socket.gethostname()}"


def _open_pidfd(pid: int) -> int | None:
    """A pidfd for ``pid``; None if unsupported; raises ProcessLookupError if ``pid`` is gone."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)
    except ProcessLookupError:
        raise
    except OSError:
        return None
    return fd


def _die(reason: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"lumber: {reason}; stopping this run (SIGKILL)\n")
        sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def watch_parent(environ: dict[str, str] | None = None) -> None:
    """(2) and (3) of the module docstring, for the driver; returns at once (the watch is a daemon thread)."""
    env = os.environ if environ is None else environ
    # no check of getppid() here: in a container the JVM may well be pid 1
    set_parent_death_signal(signal.SIGKILL)
    pid_text, _, host = env.get(PARENT_PID_ENV, "").partition("@")
    if not pid_text.isdigit() or host != socket.gethostname():
        return
    pid = int(pid_text)
    try:
        fd = _open_pidfd(pid)
    except ProcessLookupError:
        _die(f"the lumber process that started this run (pid {pid}) is gone")
        return
    if fd is None:
        return

    def wait() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(None):
            pass
        _die(f"the lumber process that started this run (pid {pid}) exited")

    threading.Thread(target=wait, name="lumber-parent-watch", daemon=True).start()
