"""Consumer groups: members that share a topic's partitions, of two kinds, behind one API.

What both kinds share sits here: :mod:`.group_consumer`
(:class:`~broker.client.groups.group_consumer.GroupConsumer`, the application's API, paper section 3.2),
:mod:`.group_config` (the ``[group]`` section), :mod:`.partition_assignor` (who consumes which partition:
range, Algorithm 1, and round-robin; a member's streams), :mod:`.rebalance_listener` (the application's
callbacks when partitions move, and how both kinds call them), :mod:`.group_partition` (one partition of a
group as ``lumber groups describe`` shows it: committed offset, log end, lag) and :mod:`.lag_evaluation`
(Burrow's evaluation of a group's offsets, for ``lumber groups`` and the lag exporter).

The two kinds, each in its own folder: :mod:`broker.client.groups.zookeeper`, the paper's groups coordinated
through ZooKeeper by their members, and :mod:`broker.client.groups.kafka`, Kafka's classic group protocol
coordinated by the brokers. Both feed records to the application through the consumer's
:mod:`~broker.client.consumer.message_stream`; neither imports the producer.
"""
