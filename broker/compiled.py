"""Compiled kernels: the hot loops that numpy would spread over dozens of array passes, written once as plain
Python over numpy arrays and scalars, and compiled to machine code by numba (LLVM, shipped in numba's and
llvmlite's wheels: no C compiler is needed where Lumber is installed).

:func:`kernel` is the decorator of a kernel, ``numba.njit`` with the project's three choices:

- ``cache=True``: the compiled code is written to the module's ``__pycache__`` (an index ``*.nbi`` and
  one ``*.nbc`` per signature) by the first process that compiles it, and loaded from there by every
  later one (a broker, a test's child process), which then pays no compilation. numba writes each cache
  file under a temporary name and renames it into place (``os.replace``), so brokers loading and writing
  the cache at once each see a whole old file or a whole new one; a source change invalidates the index
  (its stamp is the source file's). Where ``__pycache__`` cannot be written, numba falls back to its
  user-wide cache directory (``NUMBA_CACHE_DIR`` overrides both).
- ``nogil=True``: a kernel releases the interpreter lock while it runs, so the broker's request threads
  are not held up by a cleaner thread inside one.
- no bounds checks (numba's default): every kernel checks the positions it reads against its array's
  length itself and reports bad input as a result, never by reading outside an array (a broker never dies
  of a client's bytes).

:func:`inlined` is the decorator of a small helper of kernels (a varint, a hash round): compiled into each
kernel that calls it, never called from Python.

numba is imported by the modules that define kernels (``*_kernels.py``), and those modules are imported on
first use by the code that calls them, so that a process that never runs a kernel (a client, a broker that
never cleans a log, a Spark worker) never pays numba's import (about 0.2 s and 40 MiB).

:func:`loaded` tells a request path whether the kernels are ready (:func:`mark_loaded`, by
:mod:`broker.log.kernel_load` once it ran each): a path that may use them but must not wait for numba's
import and a first compile (0.4 s from the cache, 5-11 s on a fresh machine) starts that load in the
background and takes its Python route until then.
The flag is a ``threading.Event``: set once, read from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["inlined", "kernel", "loaded", "mark_loaded"]

#: Set once the kernels are imported and compiled or loaded from the cache (see the module docstring).
_loaded = threading.Event()

F = TypeVar("F", bound=Callable[..., Any])


def kernel(func: F) -> F:
    """``func`` compiled by numba on its first call (or loaded from the cache; see the module docstring)."""
    import numba  # noqa: PLC0415 - only modules of kernels import this module, themselves imported late

    return cast(F, numba.njit(cache=True, nogil=True)(func))


def inlined(func: F) -> F:
    """``func`` compiled into the kernels that call it (``inline="always"``: no call per use)."""
    import numba  # noqa: PLC0415 - see kernel

    return cast(F, numba.njit(inline="always", nogil=True)(func))


def mark_loaded() -> None:
    """Every kernel has run once in this process: later calls neither import nor compile."""
    _loaded.set()


def loaded() -> bool:
    """Whether :func:`mark_loaded` was called (a kernel call now costs no import or compile)."""
    return _loaded.is_set()
