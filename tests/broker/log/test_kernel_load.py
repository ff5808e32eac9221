"""Loading the compiled kernels (broker/log/kernel_load.py): the first produce of many records to a compacted
log starts the load without waiting for it, and later requests use the kernels. Each case runs in a child
process of its own, where numba is not imported yet (this process may have loaded it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys
from pathlib import Path

from broker import compiled
from broker.log import kernel_load
from broker.log.log import Log
from broker.record.errors import InvalidRecordError
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.log.helpers import BASE_TS, config


def batch(count, keyless_at=None):
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(BASE_TS, None if i == keyless_at else b"k%d" % i, b"v")
    return builder.build()


root = Path(sys.argv[1])
(root / "compacted-0").mkdir()
log = Log(root / "compacted-0", config(root, cleanup_policy="compact"))
report = {}
log.append(batch(63))
report["small"] = [kernel_load._loading is not None, "numba" in sys.modules]
log.append(batch(64))
loading = kernel_load._loading
report["many"] = [loading is not None, compiled.loaded()]
kernel_load.load_kernels()
report["waited"] = [kernel_load._loading is loading, compiled.loaded(), "numba" in sys.modules]
log.append(batch(64))
try:
    log.append(batch(64, keyless_at=40))
except InvalidRecordError as exc:
    report["refused"] = str(exc)
report["end"] = log.log_end_offset
log.close()
print(json.dumps(report))
"""


def test_the_first_request_of_many_records_to_a_compacted_log_starts_the_load_and_does_not_wait(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], check=True, capture_output=True, env=env, timeout=300
    )
    report = json.loads(done.stdout)
    # 63 records are walked, and start nothing: numba is not even imported
    assert report["small"] == [False, False]
    # 64 start the load, and the request is answered before it is done (walked: numba's import alone
    # takes longer than walking 64 records)
    assert report["many"] == [True, False]
    # the cleaner's wait joins that same load
    assert report["waited"] == [True, True, True]
    # later requests go by the key columns, which name the keyless record too
    assert "without a key: record #40 at offset 40 of the batch (of 64 records)" in report["refused"]
    assert report["end"] == 63 + 64 + 64
