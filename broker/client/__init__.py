"""Lumber's own Kafka clients: a batching producer and a prefetching consumer of explicit partitions.

Both speak the Kafka wire protocol (:mod:`broker.protocol`) to Lumber brokers, or to any Kafka broker whose
API versions overlap theirs, and learn the cluster from ZooKeeper (the paper's registry) or from bootstrap
servers.

Layout, one folder per concern (as kafka-python's ``producer/``, ``consumer/``, ``coordinator/``), from the
bottom up; an import points down this list, never up or across (``tests/test_layering.py``):

* :mod:`.network`: one pipelined connection to a broker;
* :mod:`.metadata`: what the client knows of the cluster (snapshots, kept fresh from ZooKeeper or bootstrap
  servers) and its connections (the broker pool);
* :mod:`.producer`: :class:`Producer` (the API), its accumulator, batches, sender thread, partitioner and
  delivery listener (the audit's hook), the internal topics its publishers create, ``[producer]``;
* :mod:`.consumer`: :class:`Consumer` (the API), its fetcher thread, fetched batches (the record decoders),
  a group member's message streams, ``[consumer]``;
* :mod:`.groups`: consumer groups, the API of both kinds (``GroupConsumer``), ``[group]``, the assignors and
  the lag evaluation; the paper's ZooKeeper groups in :mod:`.groups.zookeeper` and Kafka's group protocol in
  :mod:`.groups.kafka`, each with its ``lumber groups`` admin;
* here: :mod:`.errors` (the client's exceptions) and :mod:`.settings` (checks shared by the config
  sections).

What ``lumber produce`` and ``lumber consume`` do with these is :mod:`lumber.cli.console_tools`.

The package imports the record format, the protocol and the cluster's ZooKeeper layout, never the audit
(:mod:`audit`), the schema registry (:mod:`schemas`) or the apps.

The package imports nothing of its own: each class is imported from its module, so that reading a config
section (``lumber.config`` takes ``[consumer]`` from :mod:`.consumer.consumer_config`) loads none of the
client's machinery.
"""
