"""The plan's JSON (``plans/<run_id>.json``): a plan written before the JSON rewrite (96c3bd0) loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.record.topic_partition import TopicPartition
from pipeline.load_errors import MalformedJsonError
from pipeline.load_plan import LoadPlan, TopicSchema
from pipeline.ranges import LossRange, OffsetRange, PartitionOffsets
from pipeline.source import ReadTask

OLD = Path(__file__).parent / "formats" / "plan-format1.json"
SCHEMA = (
    '{"type":"record","name":"PageView","fields":'
    '[{"name":"url","type":"string"},{"name":"ts","type":"long"}]}'
)
R0 = OffsetRange("page_view", 0, 1000, 1200)
R1 = OffsetRange("page_view", 1, 950, 980)


def test_an_old_plan_loads_with_each_task_given_its_topics_schema() -> None:
    plan = LoadPlan.loads(OLD.read_text(), str(OLD))
    assert plan == LoadPlan(
        job="hourly",
        run_id="20261122T100500Z-3f2a9c",
        base_sequence=6,
        planned_at_ms=1795341880000,
        cutoff_ms=1795341600000,
        partitions=(
            PartitionOffsets(TopicPartition("page_view", 0), 0, 1300, 1200),
            PartitionOffsets(TopicPartition("page_view", 1), 950, 980, None),
        ),
        committed={TopicPartition("page_view", 0): 1000, TopicPartition("page_view", 1): 900},
        next_offsets={TopicPartition("page_view", 0): 1200, TopicPartition("page_view", 1): 980},
        ranges=(R0, R1),
        losses=(LossRange("page_view", 1, 900, 950),),
        tasks=(ReadTask(0, R0, SCHEMA, 11, "ts"), ReadTask(1, R1, SCHEMA, 11, "ts")),
        schemas={"page_view": TopicSchema("page_view-value", 2, 11, SCHEMA, "ts")},
    )
    # written again: the same JSON, tasks without their schema (it is written once, under "schemas")
    assert json.loads(plan.dumps()) == json.loads(OLD.read_text())
    assert "reader_schema" not in plan.to_json()["tasks"][0]


def test_a_task_whose_topic_has_no_schema_is_named() -> None:
    value = json.loads(OLD.read_text())
    value["schemas"] = {}
    with pytest.raises(
        MalformedJsonError, match=r"^p\.json: not a valid load plan: .*task 0: no schema under"
    ):
        LoadPlan.from_json(value, "p.json")
