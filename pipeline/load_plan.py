"""A load run's plan: asked of the brokers and the registry on the driver, persisted before any read.

:func:`make_plan` lists the cluster's topics (ZooKeeper, or Metadata from bootstrap servers), keeps those
``[load] topics_allow`` / ``topics_deny`` select (``--topics`` narrows further), asks the partitions' leaders
for the log start, the log end and, with a cutoff, the first offset at or after it (ListOffsets), pins each
topic's reader schema (the latest version of the subject ``<topic>-value``), and plans the ranges and tasks
with the pure functions of :mod:`pipeline.ranges`. The result, :class:`LoadPlan`, is JSON (written to
``plans/<run_id>.json`` by :meth:`pipeline.commit.CommitProtocol.persist_plan`), and its tasks are the
:class:`~pipeline.source.ReadTask` descriptions the Spark tasks read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.client.broker_pool import BrokerPool
from broker.client.cluster_metadata import metadata_source
from broker.client.cluster_snapshot import ClusterSnapshot
from broker.client.consumer import Consumer
from broker.client.consumer_config import ConsumerConfig
from broker.client.errors import ClientError
from broker.record.topic_partition import TopicPartition
from pipeline import avro_arrow
from pipeline.commit import offsets_from_json, offsets_to_json
from pipeline.load_config import LoadConfig
from pipeline.load_errors import PlanError
from pipeline.ranges import LossRange, OffsetRange, PartitionOffsets, plan_ranges, split_ranges
from pipeline.source import ReadTask
from schemas.client import SchemaRegistryClient
from schemas.errors import SchemaError, SubjectNotFoundError
from schemas.registry.avro_schema import AvroSchema

PLAN_FORMAT = 1


@dataclass(frozen=True, slots=True)
class TopicSchema:
    """The reader schema pinned for a topic in a run."""

    subject: str
    version: int
    schema_id: int
    schema: str
    event_time_field: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "version": self.version,
            "schema_id": self.schema_id,
            "schema": self.schema,
            "event_time_field": self.event_time_field,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> TopicSchema:
        return cls(
            str(value["subject"]),
            int(value["version"]),
            int(value["schema_id"]),
            str(value["schema"]),
            value.get("event_time_field"),
        )


@dataclass(frozen=True)
class LoadPlan:
    """Everything a run will do, decided before it reads (see the module docstring)."""

    job: str
    run_id: str
    base_sequence: int
    planned_at_ms: int
    cutoff_ms: int | None
    partitions: tuple[PartitionOffsets, ...]
    committed: Mapping[TopicPartition, int]
    next_offsets: Mapping[TopicPartition, int]
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

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "job": self.job,
            "run_id": self.run_id,
            "base_sequence": self.base_sequence,
            "planned_at_ms": self.planned_at_ms,
            "cutoff_ms": self.cutoff_ms,
            "partitions": [
                {
                    "topic": p.topic_partition.topic,
                    "partition": p.topic_partition.partition,
                    "log_start_offset": p.log_start_offset,
                    "high_watermark": p.high_watermark,
                    "cutoff_offset": p.cutoff_offset,
                }
                for p in self.partitions
            ],
            "committed": offsets_to_json(self.committed),
            "next_offsets": offsets_to_json(self.next_offsets),
            "ranges": [r.to_json() for r in self.ranges],
            "losses": [loss.to_json() for loss in self.losses],
            "tasks": [{k: v for k, v in t.to_json().items() if k != "reader_schema"} for t in self.tasks],
            "schemas": {topic: s.to_json() for topic, s in sorted(self.schemas.items())},
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> LoadPlan:
        schemas = {topic: TopicSchema.from_json(s) for topic, s in value["schemas"].items()}
        return cls(
            job=str(value["job"]),
            run_id=str(value["run_id"]),
            base_sequence=int(value["base_sequence"]),
            planned_at_ms=int(value["planned_at_ms"]),
            cutoff_ms=None if value.get("cutoff_ms") is None else int(value["cutoff_ms"]),
            partitions=tuple(
                PartitionOffsets(
                    TopicPartition(str(p["topic"]), int(p["partition"])),
                    int(p["log_start_offset"]),
                    int(p["high_watermark"]),
                    None if p.get("cutoff_offset") is None else int(p["cutoff_offset"]),
                )
                for p in value["partitions"]
            ),
            committed=offsets_from_json(value["committed"]),
            next_offsets=offsets_from_json(value["next_offsets"]),
            ranges=tuple(OffsetRange.from_json(r) for r in value["ranges"]),
            losses=tuple(LossRange.from_json(loss) for loss in value["losses"]),
            tasks=tuple(
                ReadTask.from_json({**t, "reader_schema": schemas[str(t["topic"])].schema})
                for t in value["tasks"]
            ),
            schemas=schemas,
        )


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
        self._config = ConsumerConfig(
            **{
                **{f: getattr(consumer_config, f) for f in consumer_config.__dataclass_fields__},
                "bootstrap_servers": list(bootstrap_servers),
                "auto_offset_reset": "none",
                "client_id": "lumber-load-planner",
            }
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
