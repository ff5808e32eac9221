"""The broker process: request handling over the log, the network layer and the cluster metadata.

:class:`~broker.server.broker_server.BrokerServer` wires them together; ``lumber broker start`` runs one.
One module per concept, as in Kafka's ``kafka.server``:

* :mod:`~broker.server.kafka_apis`: the protocol layer (decode, dispatch, respond), with
  :mod:`~broker.server.admin_apis` (topics and configs) and :mod:`~broker.server.group_apis` (the
  consumer group APIs) answering their share of the API keys;
* :mod:`~broker.server.error_codes`: the one table from exceptions to Kafka error codes;
* :mod:`~broker.server.replica_manager`: the local partitions, append, fetch reads, ListOffsets, delayed
  operations (where followers, the ISR and the high watermark land with replication), with its ISR thread
  in :mod:`~broker.server.isr_changes`;
* :mod:`~broker.server.partition`: one partition's log and replica state;
* :mod:`~broker.server.delayed_produce`, :mod:`~broker.server.delayed_fetch`,
  :mod:`~broker.server.delayed_operation`, :mod:`~broker.server.purgatory`: requests that wait;
* :mod:`~broker.server.admin_manager`, :mod:`~broker.server.topic_metadata`: topic administration and
  Metadata answers;
* :mod:`~broker.server.handler_pool`, :mod:`~broker.server.broker_metrics`: handler threads and metrics,
  the per-answer ones kept per thread without locks (:mod:`~broker.server.thread_cells`,
  :mod:`~broker.server.thread_histogram`, :mod:`~broker.server.thread_counter`);
* :mod:`~broker.server.errors`: the errors, under :class:`broker.errors.BrokerError`.
"""
