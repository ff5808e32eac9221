"""Lumber's own Kafka clients: a batching producer and a prefetching consumer of explicit partitions.

Both speak the Kafka wire protocol (:mod:`broker.protocol`) to Lumber brokers, or to any Kafka broker whose
API versions overlap theirs, and learn the cluster from ZooKeeper (the paper's registry) or from bootstrap
servers.

Layout:

* :mod:`.producer` (:class:`Producer`, the API), :mod:`.record_accumulator` (the batches),
  :mod:`.sender` (the sender thread), :mod:`.producer_batch` (the per-partition batch, futures),
  :mod:`.delivery_listener` (what a producer tells of its finished batches: the audit's hook),
  :mod:`.producer_config` (``[producer]``), :mod:`.partitioner` (murmur2 and the sticky partitioner);
* :mod:`.consumer` (:class:`Consumer`), :mod:`.fetcher` (background fetching and prefetch),
  :mod:`.fetched_batch` (batches and the record decoders), :mod:`.consumer_record`,
  :mod:`.consumer_config` (``[consumer]``);
* :mod:`.connection` (one pipelined broker connection), :mod:`.broker_pool` (a client's connections),
  :mod:`.cluster_metadata`, :mod:`.cluster_snapshot`, :mod:`.bootstrap_metadata_source`,
  :mod:`.zookeeper_metadata_source` (learning the cluster), :mod:`.internal_topic` (the audit topic,
  created by its publishers when missing);
* consumer groups: :mod:`.group_consumer` (:class:`~broker.client.group_consumer.GroupConsumer`, the API
  of both kinds), :mod:`.group_config` (``[group]``); the paper's ZooKeeper groups in
  :mod:`.group_membership` and its recipes, :mod:`.group_admin`; Kafka's group protocol in
  :mod:`.kafka_group_membership`, :mod:`.consumer_protocol` (the subscription and assignment bytes),
  :mod:`.group_coordinator_lookup` (FindCoordinator), :mod:`.kafka_group_admin`;
* :mod:`.console` (what ``lumber produce`` and ``lumber consume`` do), :mod:`.errors`.

The package imports the record format, the protocol and the cluster's ZooKeeper layout, never the audit
(:mod:`audit`), the schema registry (:mod:`schemas`) or the apps.
"""

from broker.client.consumer import Consumer
from broker.client.consumer_config import ConsumerConfig
from broker.client.consumer_record import ConsumerRecord
from broker.client.fetched_batch import FetchedBatch, PartitionValues
from broker.client.producer import Producer
from broker.client.producer_batch import BulkDelivery, DeliveryRange, RecordFuture, RecordMetadata
from broker.client.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition

__all__ = [
    "BulkDelivery",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "DeliveryRange",
    "FetchedBatch",
    "PartitionValues",
    "Producer",
    "ProducerConfig",
    "RecordFuture",
    "RecordMetadata",
    "TopicPartition",
]
