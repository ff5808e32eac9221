"""A load run's plan: asked of the brokers and the registry on the driver, persisted before any read.

:func:`make_plan` lists the cluster's topics (ZooKeeper, or Metadata from bootstrap servers), keeps those
``[load] topics_allow`` / ``topics_deny`` select (``--topics`` narrows further), asks the partitions' leaders
for the log start, the log end and, with a cutoff, the first offset at or after it (ListOffsets), pins each
topic's reader schema (the latest version of the subject ``<topic>-value``), and plans the ranges and tasks
with the pure functions of :mod:`pipeline.ranges`. The result, :class:`LoadPlan`, is JSON (written to
``plans/<run_id>.json`` by :meth:`pipeline.commit.CommitProtocol.persist_plan`), and its tasks are the
:class:`~pipeline.source.ReadTask` descriptions the Spark tasks read. In the plan's JSON a task has no
``reader_schema``: it is its topic's, written once under ``schemas``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import SerializerFunctionWrapHandler, field_serializer, model_validator

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import ClientError
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import metadata_source
from broker.client.metadata.cluster_snapshot import ClusterSnapshot
from broker.record.topic_partition import TopicPartition
from pipeline import avro_arrow
from pipeline.json_value import JsonValue, Offsets
from pipeline.load_config import LoadConfig
from pipeline.load_errors import PlanError
from pipeline.ranges import LossRange, OffsetRange, PartitionOffsets, plan_ranges, split_ranges
from pipeline.source import ReadTask
from schemas.avro_schema import AvroSchema
from schemas.client import SchemaRegistryClient
from schemas.errors import SchemaError, SubjectNotFoundError

PLAN_FORMAT = 1


@dataclass(frozen=True, slots=True)
class TopicSchema(JsonValue):
    """The reader schema pinned for a topic in a run."""

    JSON_WHAT: ClassVar[str] = "topic schema"

    subject: str
    version: int
    schema_id: int
    schema: str
    event_time_field: str | None = None


@dataclass(frozen=True)
class LoadPlan(JsonValue):
    """Everything a run will do, decided before it reads (see the module docstring)."""

    JSON_WHAT: ClassVar[str] = "load plan"
    JSON_FORMAT: ClassVar[int | None] = PLAN_FORMAT

    job: str
    run_id: str
    base_sequence: int
    planned_at_ms: int
    cutoff_ms: int | None
    partitions: tuple[PartitionOffsets, ...]
    committed: Offsets
    next_offsets: Offsets
    ranges: tuple[OffsetRange, ...]
    losses: tuple[LossRange, ...]
    tasks: tuple[ReadTask, ...]
    schemas: Mapping[str, TopicSchema]

    @property
    def record_count(self) -> int:
        return sum(r.record_count for r in self.ranges)

    def tasks_by_id(self) -> dict[int, OffsetRange]:
        return {task.task_id: task.range for task in self.tasks}

    def tasks_of(self, topic: str) -> list[ReadTask]:
        return [task for task in self.tasks if task.range.topic == topic]

    def topics_with_tasks(self) -> list[str]:
        return sorted({task.range.topic for task in self.tasks})

    @field_serializer("tasks", mode="wrap")
    def _tasks_json(self, tasks: tuple[ReadTask, ...], handler: SerializerFunctionWrapHandler) -> Any:
        """The tasks without their reader schema: it is the topic's, written once under ``schemas``."""
        return [{k: v for k, v in task.items() if k != "reader_schema"} for task in handler(tasks)]

    @model_validator(mode="before")
    @classmethod
    def _tasks_schemas(cls, value: Any) -> Any:
        """Give each task its topic's reader schema back (see :meth:`_tasks_json`)."""
        if not isinstance(value, Mapping) or not isinstance(value.get("schemas"), Mapping):
            return value
        schemas = value["schemas"]
        tasks = value.get("tasks")
        if not isinstance(tasks, list):
            return value
        filled = []
        for task in tasks:
            if isinstance(task, Mapping) and "reader_schema" not in task:
                pinned = schemas.get(task.get("topic"))
                if not isinstance(pinned, Mapping) or "schema" not in pinned:
                    raise ValueError(f"task {task.get('task_id')}: no schema under schemas for its topic")
                filled.append({**task, "reader_schema": pinned["schema"]})
            else:
                filled.append(task)
        return {**value, "tasks": filled}


def select_topics(available: Sequence[str], load: LoadConfig, requested: Sequence[str] | None) -> list[str]:
    """The topics a run loads: ``requested`` (each must exist and be allowed) or every allowed topic."""
    if requested:
        missing = sorted(set(requested) - set(available))
        if missing:
            raise PlanError(f"--topics names {', '.join(missing)}, which the cluster does not have")
        refused = sorted(t for t in requested if not load.topic_selected(t))
        if refused:
            raise PlanError(
                f"--topics names {', '.join(refused)}, which [load] topics_allow / topics_deny exclude"
            )
        return sorted(set(requested))
    return sorted(t for t in available if load.topic_selected(t))


class ClusterView:
    """The driver's questions to the brokers: topics, partitions, log start, log end, offsets for a time."""

    def __init__(
        self, consumer_config: ConsumerConfig, bootstrap_servers: Sequence[str], zookeeper_connect: str | None
    ) -> None:
        self._config = consumer_config.replace(
            bootstrap_servers=list(bootstrap_servers),
            auto_offset_reset="none",
            client_id="lumber-load-planner",
        )
        self._bootstrap = list(bootstrap_servers)
        self._zookeeper = None if bootstrap_servers else zookeeper_connect
        self._consumer = Consumer(
            self._config, bootstrap_servers=self._bootstrap, zookeeper_connect=self._zookeeper
        )

    def topics(self) -> list[str]:
        """Every topic of the cluster."""
        config = self._config
        pool = BrokerPool(
            client_id=config.client_id,
            request_timeout_ms=config.request_timeout_ms,
            connect_timeout_ms=config.connect_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            security=config.client_security("load"),
        )
        try:
            source = metadata_source(
                self._bootstrap, self._zookeeper, pool, section="load", timeout_ms=config.connect_timeout_ms
            )
            try:
                snapshot = source.fetch(None, False, ClusterSnapshot())
            finally:
                source.close()
        finally:
            pool.close()
        return sorted(snapshot.topics)

    def partition_offsets(self, topics: Sequence[str], cutoff_ms: int | None) -> list[PartitionOffsets]:
        consumer = self._consumer
        partitions = [tp for topic in topics for tp in consumer.partitions_for(topic)]
        if not partitions:
            return []
        starts = consumer.beginning_offsets(partitions)
        ends = consumer.end_offsets(partitions)
        cutoffs: Mapping[TopicPartition, int | None] = {}
        if cutoff_ms is not None:
            cutoffs = consumer.offsets_for_times(dict.fromkeys(partitions, cutoff_ms))
        return [
            PartitionOffsets(tp, starts[tp], ends[tp], cutoffs.get(tp) if cutoff_ms is not None else None)
            for tp in partitions
        ]

    def close(self) -> None:
        self._consumer.close()


def reader_schemas(
    registry: SchemaRegistryClient, topics: Sequence[str], event_time_fields: Mapping[str, str]
) -> dict[str, TopicSchema]:
    """Each topic's reader schema: the latest version of ``<topic>-value``, checked for the output."""
    found: dict[str, TopicSchema] = {}
    for topic in topics:
        subject = f"{topic}-value"
        try:
            latest = registry.get_latest(subject)
        except SubjectNotFoundError as exc:
            raise PlanError(
                f"topic {topic!r} has no value schema in the registry at {registry.url} (subject {subject!r} "
                "not found); register one, or exclude the topic with [load] topics_deny"
            ) from exc
        except SchemaError as exc:
            raise PlanError(f"topic {topic!r}: cannot read subject {subject!r}: {exc}") from exc
        schema = AvroSchema.parse(latest.schema)
        try:
            avro_arrow.payload_schema(schema)
            field_name = event_time_fields.get(topic)
            if field_name is not None:
                avro_arrow.event_time_type(schema, field_name)
        except PlanError as exc:
            raise PlanError(f"topic {topic!r}, subject {subject!r} version {latest.version}: {exc}") from exc
        found[topic] = TopicSchema(
            subject, latest.version, latest.schema_id, schema.canonical, event_time_fields.get(topic)
        )
    return found


def make_plan(
    *,
    load: LoadConfig,
    cluster: ClusterView,
    registry: SchemaRegistryClient,
    committed: Mapping[TopicPartition, int],
    run_id: str,
    base_sequence: int,
    planned_at_ms: int,
    cutoff_ms: int | None = None,
    topics: Sequence[str] | None = None,
) -> LoadPlan:
    """Plan a run (see the module docstring)."""
    try:
        selected = select_topics(cluster.topics(), load, topics)
        partitions = cluster.partition_offsets(selected, cutoff_ms)
    except ClientError as exc:
        raise PlanError(f"cannot learn the topics' offsets from the cluster: {exc}") from exc
    ranged = plan_ranges(
        partitions,
        committed,
        start=load.start,
        on_out_of_range=load.on_out_of_range,
        max_records_per_partition=load.max_records_per_partition,
    )
    with_records = sorted({r.topic for r in ranged.ranges})
    schemas = reader_schemas(registry, with_records, load.event_time_by_topic())
    pieces = split_ranges(
        ranged.ranges, min_partitions=load.min_partitions, max_records_per_task=load.max_records_per_task
    )
    tasks = tuple(
        ReadTask(
            index,
            piece,
            schemas[piece.topic].schema,
            schemas[piece.topic].schema_id,
            schemas[piece.topic].event_time_field,
        )
        for index, piece in enumerate(pieces)
    )
    return LoadPlan(
        job=load.job,
        run_id=run_id,
        base_sequence=base_sequence,
        planned_at_ms=planned_at_ms,
        cutoff_ms=cutoff_ms,
        partitions=tuple(partitions),
        committed=dict(committed),
        next_offsets=dict(ranged.next_offsets),
        ranges=ranged.ranges,
        losses=ranged.losses,
        tasks=tasks,
        schemas=schemas,
    )
