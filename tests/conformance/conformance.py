"""Run one scenario against Kafka and Lumber and compare what a user observes.

A *scenario* is a function ``scenario(target, topic, **kwargs) -> Transcript``: it drives standard clients
(confluent-kafka, kcat, kafka-python, aiokafka) against ``target.bootstrap``, configured with the listener's
``target.security`` (any listener: PLAINTEXT or SASL_SSL), and returns plain data (dicts, lists, strings,
ints) of what the clients saw. :func:`conform` runs it against Kafka first, then Lumber, with
the same fresh topic name, and fails at the first difference, printing both transcripts.

A transcript may differ only where ``DIFFERENCES.md`` lists the difference: each row's id names a
normaliser in :data:`NORMALISERS` that both transcripts of the scenarios it names go through before the
comparison. A Lumber bug is fixed, never listed. Values that must differ between any two runs (wall-clock
timestamps, cluster ids, ports) are normalised by the scenario itself, which says so where it does.

Records a scenario stamps itself carry CreateTime timestamps from :data:`RECENT_TS` on, the same in both
runs: both brokers check retention every 500 ms here (``conftest.py``) with ``retention.ms`` 7 days, so
records stamped years ago were deleted while the clients were still reading them (a read that found the log
start past them and nothing to read, on Kafka once and on Lumber once). A scenario that needs older records
says so and sets the topic's ``retention.ms`` itself.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conformance.target import Target

#: CreateTime of the records scenarios stamp themselves: a minute before this module was imported, the same
#: for both brokers' runs (see the module docstring)
RECENT_TS = int(time.time() * 1000) - 60_000

Transcript = dict[str, Any]
Scenario = Callable[..., Transcript]
Normaliser = Callable[[Transcript], Transcript]

DIFFERENCES_PATH = Path(__file__).with_name("DIFFERENCES.md")


def _min_insync_source(transcript: Transcript) -> Transcript:
    entry = transcript.get("configs", {}).get("min.insync.replicas")
    if isinstance(entry, dict) and entry.get("value") == "1":
        entry.update(source="cluster default", is_default="cluster default")
    return transcript


def _small_segments(transcript: Transcript) -> Transcript:
    if transcript.get("segment_bytes_below_1_mib") in (None, "INVALID_CONFIG"):
        transcript["segment_bytes_below_1_mib"] = "accepted by Lumber, INVALID_CONFIG from Kafka 4"
    return transcript


def _auto_create(transcript: Transcript) -> Transcript:
    if transcript.get("reports") in ([{"error": None}], [{"error": "_MSG_TIMED_OUT"}]):
        transcript["reports"] = "created and written by Kafka, refused by Lumber"
    return transcript


def _consumer_group_protocol(transcript: Transcript) -> Transcript:
    served: tuple[Any, ...] = (True, [], [0, 1], ["v0", "v1", "v2", "v3"])
    unserved: tuple[Any, ...] = (False, [], [], [])
    keys = ("advertises_consumer_group_heartbeat", "errors", "assigned", "values")
    if tuple(transcript.get(key) for key in keys) in (served, unserved):
        for key in keys:
            del transcript[key]
        transcript["member"] = "served by Kafka (both partitions, 4 records), not advertised by Lumber"
    return transcript


def _produce_error_message(transcript: Transcript) -> Transcript:
    for value in transcript.values():
        for answer in value if isinstance(value, list) else [value]:
            if isinstance(answer, dict) and answer.get("error_code") not in (None, 0):
                message = answer.get("error_message")
                if message is None or (isinstance(message, str) and message):
                    answer["error_message"] = "none from Kafka, the cause from Lumber"
    return transcript


def _last_isr_member(transcript: Transcript) -> Transcript:
    after = transcript.get("after")
    if (
        isinstance(after, dict)
        and after.get("leader") == -1
        and after.get("isr") in ([], after.get("replicas"))
    ):
        after["isr"] = "empty on Kafka (an eligible leader replica), the last in-sync replica on Lumber"
    return transcript


def _old_librdkafka_scram_nonce(transcript: Transcript) -> Transcript:
    login = transcript.get("login")
    version = tuple(transcript.get("librdkafka", ()))
    if not isinstance(login, dict) or version >= (2, 6, 1):
        return transcript
    refused = login.get("succeeded") is False and "invalid credentials" in str(login.get("first_failure"))
    if refused or login == {"succeeded": True, "first_failure": None, "said": []}:
        transcript["login"] = "refused by Kafka 4 (the nonce kcat's librdkafka sends), accepted by Lumber"
    return transcript


#: One normaliser per row of DIFFERENCES.md (same id), applied to the named scenarios' transcripts.
NORMALISERS: dict[str, Normaliser] = {
    "min_insync_replicas_source": _min_insync_source,
    "segment_bytes_floor": _small_segments,
    "auto_create_topics": _auto_create,
    "consumer_group_protocol": _consumer_group_protocol,
    "produce_error_message": _produce_error_message,
    "last_isr_member": _last_isr_member,
    "old_librdkafka_scram_nonce": _old_librdkafka_scram_nonce,
}


def listed_differences() -> dict[str, set[str]]:
    """DIFFERENCES.md's table: difference id -> the scenarios it applies to."""
    rows: dict[str, set[str]] = {}
    for line in DIFFERENCES_PATH.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and re.fullmatch(r"`[a-z0-9_]+`", cells[0]):
            rows[cells[0].strip("`")] = {name.strip("` ") for name in cells[1].split(",")}
    return rows


def topic_name(scenario: Scenario) -> str:
    """A fresh topic name, the same on both brokers, that says which scenario made it."""
    return f"{scenario.__name__[:40]}-{uuid.uuid4().hex[:8]}"


def _normalised(scenario: str, transcript: Transcript) -> Transcript:
    for difference, scenarios in listed_differences().items():
        if scenario in scenarios:
            transcript = NORMALISERS[difference](transcript)
    return transcript


def _show(transcript: Transcript) -> str:
    return json.dumps(transcript, indent=1, sort_keys=True, default=repr)


def conform(scenario: Scenario, targets: tuple[Target, Target], **kwargs: Any) -> Transcript:
    """Run ``scenario`` against Kafka and then Lumber; assert the transcripts are equal (after the
    listed differences); return Kafka's transcript."""
    kafka, lumber = targets
    topic = topic_name(scenario)
    expected = _normalised(scenario.__name__, scenario(kafka, topic, **kwargs))
    actual = _normalised(scenario.__name__, scenario(lumber, topic, **kwargs))
    if expected != actual:
        differing = sorted(k for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k))
        raise AssertionError(
            f"scenario {scenario.__name__}: Lumber's transcript differs from Kafka's at {differing}\n"
            f"--- kafka ---\n{_show(expected)}\n--- lumber ---\n{_show(actual)}"
        )
    return expected
