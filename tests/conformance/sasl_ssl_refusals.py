"""What each standard client sees when a SASL_SSL broker refuses it, as plain data for a conformance
transcript (the brokers of :mod:`tests.conformance.secure_targets`).

* ``refused_logins``: confluent-kafka (the first error an AdminClient's error callback reports), kcat
  (``-L``: its exit code and error lines), kafka-python (a KafkaAdminClient's start) and aiokafka (a
  consumer's start) logging in with a wrong password, as an unknown user, with a mechanism the broker does
  not enable (SCRAM-SHA-256), and trusting a CA that did not sign the broker's certificate (the client
  refuses the broker: nothing reaches its SASL layer).
* ``kcat_scram_login``: kcat's librdkafka version and its SCRAM-SHA-512 login (DIFFERENCES.md,
  ``old_librdkafka_scram_nonce``).
* ``acl_refusals``: as ``admin``, two topics and ACLs for ``bob``: Write on the first, Read on the second,
  Read on one group and Describe only on another; then, as bob, with each client: consuming the first (no
  Read), producing to the second (no Write), and consuming the second in the describe-only group (no Read
  on the group).

Messages keep the broker's words; what differs between any two runs is taken out of them: the broker's
address, librdkafka's elapsed milliseconds and client instance names, broker ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import time
import warnings
from dataclasses import replace
from typing import Any

from tests.conformance.clients import TLS_CLOSE_S, collect_unclosed_sockets, kcat, wait_for_leaders
from tests.conformance.conformance import Transcript
from tests.conformance.secure_targets import as_user, binding
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioPartition
    from aiokafka.errors import KafkaError as AioKafkaError
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType  # type: ignore[attr-defined]
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpPartition
    from kafka.errors import KafkaError as KafkaPythonError

#: how long a client is given to meet its refusal
REFUSAL_S = 15.0
#: how long kafka-python and aiokafka try to bootstrap through a refused login (each retries until then)
LOGIN_MS = 2000
#: how long a refused aiokafka client is given to stop
STOP_S = 3.0


def _as(target: Target, **security: str) -> Target:
    """``target`` with some client settings changed (librdkafka's names, ``_`` for ``.``)."""
    changed = {key.replace("_", "."): value for key, value in security.items()}
    return replace(target, security={**target.security, **changed})


#: a refused certificate in librdkafka's words: what precedes the reason, and the state it ends with
_CERTIFICATE_REFUSED = re.compile(
    r"(/bootstrap: ).*certificate verify failed.*?( \(after \d+ms in state \w+\))?$"
)


def client_message(target: Target, text: str) -> str:
    """A client's message with what differs between any two runs taken out: the broker's address, the
    milliseconds librdkafka counts, its client instance names, and the wording of a refused certificate
    (librdkafka words one refusal two ways as its TLS calls happen to be timed: "SSL handshake failed:
    error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, ..."
    or "error:0A000086:SSL routines::certificate verify failed"; kcat 1.7.1 gave the second against
    Lumber in one CI run of many; both keep "certificate verify failed" and the state)."""
    text = _CERTIFICATE_REFUSED.sub(r"\1certificate verify failed\2", text)
    text = text.replace(target.bootstrap, "<broker>")
    text = re.sub(r"after \d+ms", "after <n>ms", text)
    text = re.sub(r"rdkafka#(producer|consumer)-\d+", r"rdkafka#\1", text)
    text = re.sub(r"127\.0\.0\.1:\d+|\('127\.0\.0\.1', \d+, <AddressFamily\.AF_INET: 2>\)", "<broker>", text)
    text = re.sub(r", \d+ identical error\(s\) suppressed", "", text)
    return re.sub(r"(broker|node|Broker|Node)( ?[:=]? ?)-?\d+", r"\1\2<id>", text)


def _telling(error: Any) -> bool:
    """Whether a librdkafka error says why (its generic _TRANSPORT and _ALL_BROKERS_DOWN follow a refusal,
    before or after the one that names it, as attempts happen to be timed)."""
    return str(error.name()) not in ("_TRANSPORT", "_ALL_BROKERS_DOWN")


def _confluent_login(target: Target) -> dict[str, Any]:
    """The first error an AdminClient's error callback reports while it asks for Metadata (10 s at most)."""
    errors: list[Any] = []
    config: dict[str, Any] = {**target.client_config, "error_cb": errors.append}
    admin = AdminClient(config)
    deadline = time.monotonic() + 10
    while not any(_telling(e) for e in errors) and time.monotonic() < deadline:
        admin.poll(0.1)
    first = next((e for e in errors if _telling(e)), errors[0] if errors else None)
    return {
        "error": None if first is None else str(first.name()),
        "message": None if first is None else client_message(target, str(first.str())),
    }


def _kcat_lines(target: Target, stderr: str) -> dict[str, Any]:
    """kcat's first logged failure that says why (librdkafka's ``%3|...|FAIL|`` lines: the attempts' wording
    varies with their timing) and its own ``% `` lines, without what differs between runs."""
    logged = [line.split("|", 4)[-1] for line in stderr.splitlines() if "|FAIL|" in line]
    # the attempt that says why (another may say "No further error information available")
    logged = [
        line for line in logged if "handshake failed" in line or "authentication error" in line
    ] + logged
    said = {client_message(target, line) for line in stderr.splitlines() if line.startswith("% ")}
    return {"first_failure": client_message(target, logged[0]) if logged else None, "said": sorted(said)}


def _kcat_login(target: Target) -> dict[str, Any]:
    """kcat ``-L``: whether it succeeded (not its exit code: kcat 1.7.1 sometimes dies of SIGSEGV while it
    exits after a refused TLS handshake, having printed the same errors; seen once in 26 runs against Lumber
    and in none of 25 against Kafka, so not shown to be either broker's doing) and what it said."""
    code, _, err = kcat(["-L", *target.kcat_args, "-m", "2"], timeout_s=60)
    return {"succeeded": code == 0, **_kcat_lines(target, err)}


def _kafka_python_login(target: Target) -> dict[str, Any]:
    try:
        admin = KafkaAdminClient(
            **target.kafka_python_config, request_timeout_ms=LOGIN_MS, bootstrap_timeout_ms=LOGIN_MS
        )
    except KafkaPythonError as exc:
        collect_unclosed_sockets()
        return {"error": type(exc).__name__, "message": client_message(target, str(exc))}
    admin.close()
    return {"error": None}


def _aiokafka_login(target: Target) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        consumer = AIOKafkaConsumer(**target.aiokafka_config(), request_timeout_ms=LOGIN_MS)
        try:
            await consumer.start()
        except AioKafkaError as exc:
            return {"error": type(exc).__name__, "message": client_message(target, str(exc))}
        finally:
            await consumer.stop()
        return {"error": None}

    answer = asyncio.run(run())
    collect_unclosed_sockets()
    return answer


def _logins(target: Target) -> dict[str, Any]:
    return {
        "confluent_kafka": _confluent_login(target),
        "kcat": _kcat_login(target),
        "kafka_python": _kafka_python_login(target),
        "aiokafka": _aiokafka_login(target),
    }


LOGIN_REFUSALS = ("wrong_password", "unknown_user", "unknown_mechanism", "untrusted_ca")


def refused_logins(target: Target, topic: str, untrusted_cafile: str, cases: tuple[str, ...]) -> Transcript:
    """Each client logging in with a wrong password, as an unknown user, with an unknown mechanism, and
    trusting another CA than the broker's (the ``cases`` of :data:`LOGIN_REFUSALS` asked for)."""
    del topic
    variants = {
        "wrong_password": _as(target, sasl_password="not-" + target.security["sasl.password"]),
        "unknown_user": _as(target, sasl_username="mallory"),
        "unknown_mechanism": _as(target, sasl_mechanism="SCRAM-SHA-256"),
        "untrusted_ca": _as(target, ssl_ca_location=untrusted_cafile),
    }
    return {case: _logins(variants[case]) for case in cases}


def kcat_librdkafka_version() -> tuple[int, ...]:
    """The librdkafka version kcat is built with (``kcat -V``: ``... librdkafka 2.0.2 builtin...``)."""
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", kcat(["-V"])[1] + kcat(["-V"])[2])
    if found is None:
        raise AssertionError("kcat -V does not name its librdkafka version")
    return tuple(int(part) for part in found.groups())


def kcat_scram_login(target: Target, topic: str) -> Transcript:
    """kcat (``-L``) logging in with the target's SCRAM mechanism, and which librdkafka it is."""
    del topic
    return {"librdkafka": list(kcat_librdkafka_version()), "login": _kcat_login(target)}


def _confluent_delivery(target: Target, topic: str) -> dict[str, Any]:
    reports: list[Any] = []
    producer = Producer({**target.client_config, "message.timeout.ms": int(REFUSAL_S * 1000), "linger.ms": 0})
    producer.produce(topic, b"v", partition=0, on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(REFUSAL_S + 10)
    if not reports:
        return {"error": "no delivery report"}
    err = reports[0]
    return (
        {"error": None}
        if err is None
        else {"error": str(err.name()), "message": client_message(target, err.str())}
    )


def _confluent_poll_error(consumer: Any, target: Target) -> dict[str, Any]:
    deadline = time.monotonic() + REFUSAL_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        err = message.error()
        if err is None:
            return {"error": None, "value": bytes(message.value() or b"").decode()}
        if err.code() != KafkaError._PARTITION_EOF:
            return {"error": str(err.name()), "message": client_message(target, str(err.str()))}
    return {"error": f"nothing within {REFUSAL_S} s"}


def _confluent_consume(target: Target, topic: str, group: str, *, subscribe: bool) -> dict[str, Any]:
    consumer = Consumer({**target.client_config, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        if subscribe:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, 0, 0)])
        return _confluent_poll_error(consumer, target)
    finally:
        consumer.close()


def _kcat_run(target: Target, args: list[str], stdin: str | None = None) -> dict[str, Any]:
    """kcat with ``args``; its exit code (None: still running after the refusal time, then killed) and its
    lines (:func:`_kcat_lines`)."""
    try:
        done = subprocess.run(
            ["kcat", *target.kcat_args, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=REFUSAL_S,
            check=False,
        )
        code, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
    return {"exit": code, **_kcat_lines(target, err)}


def _kafka_python(target: Target, action: str, topic: str, group: str | None = None) -> dict[str, Any]:
    timeouts = {
        "request_timeout_ms": int(REFUSAL_S * 1000),
        "bootstrap_timeout_ms": int(REFUSAL_S * 1000),
    }
    try:
        if action == "produce":
            producer = KafkaProducer(
                **target.kafka_python_config, **timeouts, max_block_ms=int(REFUSAL_S * 1000)
            )
            try:
                producer.send(topic, b"v", partition=0).get(timeout=REFUSAL_S)
            finally:
                producer.close(timeout=5)
            return {"error": None}
        consumer = KafkaConsumer(
            **target.kafka_python_config,
            **timeouts,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            consumer_timeout_ms=int(REFUSAL_S * 1000),
        )
        try:
            if group is None:
                consumer.assign([KpPartition(topic, 0)])
                consumer.seek(KpPartition(topic, 0), 0)
            else:
                consumer.subscribe([topic])
            deadline = time.monotonic() + REFUSAL_S
            while time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=500).values():
                    if batch:
                        return {"error": None, "value": batch[0].value.decode()}
            return {"error": f"nothing within {REFUSAL_S} s"}
        finally:
            consumer.close()
    except KafkaPythonError as exc:
        collect_unclosed_sockets()
        return {"error": type(exc).__name__, "message": client_message(target, str(exc))}


def _aiokafka(target: Target, action: str, topic: str, group: str | None = None) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        client: Any
        if action == "produce":
            client = AIOKafkaProducer(**target.aiokafka_config(), request_timeout_ms=int(REFUSAL_S * 1000))
        else:
            client = AIOKafkaConsumer(
                **target.aiokafka_config(),
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                request_timeout_ms=int(REFUSAL_S * 1000),
            )
        try:
            await client.start()
            if action == "produce":
                await asyncio.wait_for(client.send_and_wait(topic, b"v", partition=0), REFUSAL_S)
                return {"error": None}
            if group is None:
                client.assign([AioPartition(topic, 0)])
                client.seek(AioPartition(topic, 0), 0)
            else:
                client.subscribe([topic])
            record = await asyncio.wait_for(client.getone(), REFUSAL_S)
            return {"error": None, "value": record.value.decode()}
        except AioKafkaError as exc:
            return {"error": type(exc).__name__, "message": client_message(target, str(exc))}
        except TimeoutError:
            return {"error": f"nothing within {REFUSAL_S} s"}
        finally:
            # a refused aiokafka client's stop() waits out its retries (30 s seen); what it was told is known
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(client.stop(), STOP_S)
            await asyncio.sleep(TLS_CLOSE_S)

    answer = asyncio.run(run())
    collect_unclosed_sockets()
    return answer


def _wait_in_force(target: Target, topic: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """Bob's first produce to ``topic`` (Write granted) once it succeeds: the ACLs are then in force (Kafka
    applies them from its metadata log)."""
    deadline = time.monotonic() + timeout_s
    while True:
        first = _confluent_delivery(target, topic)
        if first["error"] is None or time.monotonic() > deadline:
            return first
        time.sleep(0.2)


def acl_refusals(target: Target, topic: str) -> Transcript:
    admin_target = as_user(target, "admin")
    admin = AdminClient(admin_target.client_config)
    writable, readable = f"{topic}-w", f"{topic}-r"
    readable_group, describe_only = f"{topic}-g-read", f"{topic}-g-describe"
    for future in admin.create_topics(
        [NewTopic(n, 1, 1) for n in (writable, readable)], operation_timeout=30
    ).values():
        future.result(60)
    for name in (writable, readable):
        wait_for_leaders(admin_target, name, 1)
    bindings = [
        binding(ResourceType.TOPIC, writable, AclOperation.WRITE, "User:bob"),
        binding(ResourceType.TOPIC, readable, AclOperation.READ, "User:bob"),
        binding(ResourceType.GROUP, readable_group, AclOperation.READ, "User:bob"),
        binding(ResourceType.GROUP, describe_only, AclOperation.DESCRIBE, "User:bob"),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)
    for name in (writable, readable):  # something to read
        assert _confluent_delivery(admin_target, name)["error"] is None
    bob = as_user(target, "bob")
    kcat_bob = _as(bob, sasl_mechanism="PLAIN")  # kcat's librdkafka cannot log in to Kafka 4 with SCRAM
    return {
        "produce_granted": _wait_in_force(bob, writable),
        "consume_granted": _confluent_consume(bob, readable, readable_group, subscribe=True),
        "no_read_on_topic": {
            "confluent_kafka": _confluent_consume(bob, writable, readable_group, subscribe=False),
            "kcat": _kcat_run(kcat_bob, ["-C", "-t", writable, "-p", "0", "-o", "beginning", "-e", "-q"]),
            "kafka_python": _kafka_python(bob, "consume", writable),
            "aiokafka": _aiokafka(bob, "consume", writable),
        },
        "no_write_on_topic": {
            "confluent_kafka": _confluent_delivery(bob, readable),
            "kcat": _kcat_run(kcat_bob, ["-P", "-t", readable, "-p", "0"], stdin="v\n"),
            "kafka_python": _kafka_python(bob, "produce", readable),
            "aiokafka": _aiokafka(bob, "produce", readable),
        },
        "no_read_on_group": {
            "confluent_kafka": _confluent_consume(bob, readable, describe_only, subscribe=True),
            "kafka_python": _kafka_python(bob, "consume", readable, describe_only),
            "aiokafka": _aiokafka(bob, "consume", readable, describe_only),
        },
    }
