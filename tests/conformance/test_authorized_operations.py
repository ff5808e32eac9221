"""Authorized operations (KIP-430) without an authorizer, on Kafka and on Lumber: every operation each
resource type supports.

``authorized_operations_without_an_authorizer``: a topic, and a group with one committed offset (Empty); then
confluent-kafka's ``describe_topics`` of the topic and of one that does not exist, ``describe_cluster`` and
``describe_consumer_groups`` of the group and of one that does not exist, each asked for the authorized
operations and once not asked (:mod:`tests.conformance.authorized_operations`). The scenario with ACLs and a
super user is in :mod:`tests.conformance.test_acls`.
"""

from __future__ import annotations

from tests.conformance.authorized_operations import (
    EVERY_CLUSTER_OPERATION,
    EVERY_GROUP_OPERATION,
    EVERY_TOPIC_OPERATION,
    commit_offset,
    described_operations,
)
from tests.conformance.clients import create_topic
from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target


def authorized_operations_without_an_authorizer(target: Target, topic: str) -> Transcript:
    config = target.client_config
    created = create_topic(target, topic)
    commit_offset(config, f"{topic}-group", topic)
    rename = {topic: "<topic>", f"{topic}-missing": "<topic>-missing"}
    rename |= {f"{topic}-group": "<group>", f"{topic}-no-group": "<no-group>"}
    return {
        "created": created,
        **described_operations(
            config, [topic, f"{topic}-missing"], [f"{topic}-group", f"{topic}-no-group"], rename
        ),
    }


def test_authorized_operations_without_an_authorizer(targets: tuple[Target, Target]) -> None:
    transcript = conform(authorized_operations_without_an_authorizer, targets)
    assert transcript["asked"]["topics"] == {
        "<topic>": EVERY_TOPIC_OPERATION,
        "<topic>-missing": "UNKNOWN_TOPIC_OR_PART",
    }
    assert transcript["asked"]["cluster"] == EVERY_CLUSTER_OPERATION
    assert transcript["asked"]["groups"]["<group>"] == EVERY_GROUP_OPERATION
    assert transcript["not_asked"] == {
        "topic": {"<topic>": None},
        "group": {"<group>": None},
        "cluster": None,
    }
