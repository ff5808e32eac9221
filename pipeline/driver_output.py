"""What the load job's driver (``jobs/load.py``) tells the process that submitted it, and how.

The driver runs under ``spark-submit``, so the submitter (:mod:`pipeline.load_submit`) reads it from outside:
lines on stdout that start with :data:`PROGRESS_PREFIX` are progress, the one line that starts with
:data:`RESULT_PREFIX` is the run's record as JSON, and the exit code says how the run ended. Both sides
import these names from here: ``jobs/`` imports :mod:`pipeline`, never the reverse.
"""

from __future__ import annotations

PROGRESS_PREFIX = "lumber-load: "
RESULT_PREFIX = "lumber-load-result: "
#: the run committed, or had nothing to load
OK_EXIT_CODE = 0
#: the run failed (nothing was committed unless the message says the commit point was passed)
FAILED_EXIT_CODE = 1
#: bad arguments or config
BAD_CONFIG_EXIT_CODE = 2
#: another run of the job holds its lock
LOCKED_EXIT_CODE = 3
