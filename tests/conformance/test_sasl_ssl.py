"""Everyday client scenarios and refusals over SASL_SSL, on Kafka and on Lumber configured the same way
(:mod:`tests.conformance.secure_targets`: one test CA, SCRAM-SHA-512 and PLAIN, an ACL authorizer), both
brokers started once for the session.

* **Everyday work as a granted user**: the PLAINTEXT suite's own scenarios, run as ``alice`` (every
  operation on every topic and group granted by wildcard ACLs, not a super user) logging in with each
  mechanism: produce and fetch with confluent-kafka, kafka-python and aiokafka (``produce_and_read_back``,
  ``codec_round_trip``) and kcat (``kcat_produce_then_consume_at_once``, with PLAIN: kcat's librdkafka
  2.0.2 cannot log in to Kafka 4 with SCRAM, ``test_kcat_scram_login``), a consumer group that joins,
  commits and fetches its offsets (``admin_alters_then_lists_offsets``,
  ``commit_with_metadata_then_delete_group``), and admin requests (``describe_topic_configs``: CreateTopics,
  Metadata, DescribeConfigs; ``list_offsets``: ListOffsets).
* **Refusals** (:mod:`tests.conformance.sasl_ssl_refusals`): what each client sees for a wrong password,
  an unknown user, an unknown mechanism and a CA it does not trust (``refused_logins``), and, as ``bob``,
  for a topic without Read, a produce without Write and a group without Read (``acl_refusals``).
"""

from __future__ import annotations

from typing import Any

import pytest

from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.sasl_ssl_setup import MECHANISMS
from tests.conformance.conformance import Scenario, conform
from tests.conformance.sasl_ssl_refusals import (
    LOGIN_REFUSALS,
    acl_refusals,
    client_message,
    kcat_scram_login,
    refused_logins,
)
from tests.conformance.secure_targets import SecureBroker
from tests.conformance.target import Target
from tests.conformance.test_admin import describe_topic_configs
from tests.conformance.test_groups import (
    admin_alters_then_lists_offsets,
    commit_with_metadata_then_delete_group,
)
from tests.conformance.test_offsets import list_offsets
from tests.conformance.test_produce_consume import (
    codec_round_trip,
    kcat_produce_then_consume_at_once,
    produce_and_read_back,
)

pytestmark = [pytest.mark.interop, pytest.mark.zookeeper]

EVERYDAY: list[tuple[Scenario, dict[str, Any]]] = [
    (produce_and_read_back, {"acks": "all"}),
    (codec_round_trip, {"codec": "lz4"}),
    (admin_alters_then_lists_offsets, {}),
    (commit_with_metadata_then_delete_group, {}),
    (describe_topic_configs, {}),
    (list_offsets, {}),
]


@pytest.fixture(params=MECHANISMS)
def alice(
    request: pytest.FixtureRequest, sasl_ssl_brokers: tuple[SecureBroker, SecureBroker]
) -> tuple[Target, Target]:
    """Kafka and Lumber as alice, logging in with the parameter's mechanism."""
    kafka, lumber = sasl_ssl_brokers
    return kafka.target("alice", request.param), lumber.target("alice", request.param)


@pytest.mark.parametrize(("scenario", "kwargs"), EVERYDAY, ids=[s.__name__ for s, _ in EVERYDAY])
def test_everyday_scenarios_over_sasl_ssl(
    alice: tuple[Target, Target], scenario: Scenario, kwargs: dict[str, Any]
) -> None:
    transcript = conform(scenario, alice, **kwargs)
    assert transcript.get("created") is None
    assert not transcript.get("errors")


def test_kcat_produce_then_consume_over_sasl_ssl_with_plain(
    sasl_ssl_brokers: tuple[SecureBroker, SecureBroker],
) -> None:
    kafka, lumber = sasl_ssl_brokers
    targets = (kafka.target("alice", "PLAIN"), lumber.target("alice", "PLAIN"))
    transcript = conform(kcat_produce_then_consume_at_once, targets)
    assert transcript["consumed"] == 3000


def test_kcat_scram_login(sasl_ssl_brokers: tuple[SecureBroker, SecureBroker]) -> None:
    kafka, lumber = sasl_ssl_brokers
    conform(kcat_scram_login, (kafka.target("alice"), lumber.target("alice")))


@pytest.fixture(scope="module")
def untrusted_cafile(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A CA that signed neither broker's certificate."""
    ca = CertificateAuthority(tmp_path_factory.mktemp("untrusted-ca"))
    ca.issue("unrelated")
    return str(ca.cafile)


def test_refused_logins_over_sasl_ssl(alice: tuple[Target, Target], untrusted_cafile: str) -> None:
    """Every refusal with SCRAM-SHA-512; with PLAIN only those whose words are PLAIN's own (an unknown
    mechanism and an untrusted CA are refused before any mechanism runs)."""
    scram = alice[0].security["sasl.mechanism"] == "SCRAM-SHA-512"
    cases = LOGIN_REFUSALS if scram else ("wrong_password", "unknown_user")
    transcript = conform(refused_logins, alice, untrusted_cafile=untrusted_cafile, cases=cases)
    invalid = (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512"
        if scram
        else "Authentication failed: Invalid username or password"
    )
    for case in ("wrong_password", "unknown_user"):
        refused = transcript[case]["confluent_kafka"]
        assert refused["error"] == "_AUTHENTICATION"
        assert invalid in refused["message"]
    if scram:
        assert transcript["untrusted_ca"]["confluent_kafka"]["error"] == "_SSL"
        assert "certificate verify failed" in transcript["untrusted_ca"]["confluent_kafka"]["message"]
        assert "Unsupported SASL mechanism" in transcript["unknown_mechanism"]["confluent_kafka"]["message"]


def test_acl_refusals_over_sasl_ssl(sasl_ssl_brokers: tuple[SecureBroker, SecureBroker]) -> None:
    kafka, lumber = sasl_ssl_brokers
    transcript = conform(acl_refusals, (kafka.target("alice"), lumber.target("alice")))
    assert transcript["produce_granted"] == {"error": None}
    assert transcript["consume_granted"] == {"error": None, "value": "v"}
    refused = {"TOPIC_AUTHORIZATION_FAILED", "TopicAuthorizationFailedError"}
    for case in ("no_read_on_topic", "no_write_on_topic"):
        for client in ("confluent_kafka", "kafka_python", "aiokafka"):
            assert transcript[case][client]["error"] in refused, (case, client)
        assert transcript[case]["kcat"]["exit"] == 1
    for client in ("confluent_kafka", "kafka_python", "aiokafka"):
        error = transcript["no_read_on_group"][client]["error"]
        assert error in {"GROUP_AUTHORIZATION_FAILED", "GroupAuthorizationFailedError"}, client


def test_a_refused_certificate_reads_the_same_in_either_of_librdkafkas_wordings() -> None:
    # kcat 1.7.1 once logged the second wording against Lumber where Kafka's run logged the first (CI)
    target = Target("lumber", "127.0.0.1:17389", ())
    where = " [thrd:sasl_ssl://127.0.0.1:17389/bootstrap]: sasl_ssl://127.0.0.1:17389/bootstrap: "
    handshake = (
        f"{where}SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker "
        "certificate could not be verified, verify that ssl.ca.location is correctly configured (after 1ms "
        "in state SSL_HANDSHAKE)"
    )
    bare = (
        f"{where}error:0A000086:SSL routines::certificate verify failed (after 12ms in state SSL_HANDSHAKE)"
    )
    expected = (
        " [thrd:sasl_ssl://<broker>/bootstrap]: sasl_ssl://<broker>/bootstrap: certificate verify failed "
        "(after <n>ms in state SSL_HANDSHAKE)"
    )
    assert client_message(target, handshake) == client_message(target, bare) == expected
    # other refusals keep their words
    sasl = f"{where}SASL authentication error: Authentication failed (after 3ms in state AUTH_REQ)"
    assert client_message(target, sasl).endswith(
        "/bootstrap: SASL authentication error: Authentication failed (after <n>ms in state AUTH_REQ)"
    )
