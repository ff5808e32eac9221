"""The load job's errors: one family below :class:`~pipeline.errors.PipelineError`.

* :class:`PlanError`: the run cannot be planned (an offset gap under the ``fail`` policy, a committed offset
  beyond the log end, a topic without a value schema, a schema the output cannot hold).
* :class:`ReadError`: a task did not account for every record of its range.
* :class:`CommitError`: the commit protocol met a state it must not repair on its own (a manifest in the
  way, a file that a manifest names and that is gone).
* :class:`MalformedJsonError`: a file or message of the load (manifest, plan, run record, task summary) is
  not what its type says (:mod:`pipeline.json_value`); names the file and the field.
* :class:`FileSystemError`: a filesystem operation failed or answered ``false``; names the paths.
* :class:`JobLockedError`: another run of the same job holds the ZooKeeper lock.
* :class:`InjectedFault`: a failure injected on purpose by a test hook (:mod:`pipeline.faults`).
"""

from __future__ import annotations

from pipeline.errors import PipelineError


class LoadError(PipelineError):
    """Root of the load job's errors."""


class PlanError(LoadError):
    """The run cannot be planned; the message names the topic-partition and the offsets."""


class OffsetOutOfRangeError(PlanError):
    """Retention deleted offsets the job has not loaded, and ``on_out_of_range`` is ``fail``."""


class UnsupportedSchemaError(PlanError):
    """The topic's reader schema has a type the Parquet output cannot hold; names the field."""


class ReadError(LoadError):
    """A reading task's rows plus quarantined records differ from the records of its range."""


class CommitError(LoadError):
    """The commit protocol found a state it must not repair silently."""


class MalformedJsonError(CommitError):
    """A JSON file or message of the load does not describe its type; names the file and each bad field."""


class FileSystemError(LoadError):
    """A Hadoop filesystem operation failed or returned false; the message names the path(s)."""


class JobLockedError(LoadError):
    """Another run of the job holds its ZooKeeper lock."""


class InjectedFault(LoadError):  # noqa: N818 - a fault, not an error of the code
    """A failure injected by a test hook (``[load] fault_injection``)."""
