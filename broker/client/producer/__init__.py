"""The producer (paper section 3.2): records in, one record batch v2 per partition out, outcomes back.

A record's way down this folder: :mod:`.producer` (:class:`~broker.client.producer.producer.Producer`, the
API) picks its partition with :mod:`.partitioner` (Kafka's murmur2 for keys, a sticky choice without one)
and appends it to :mod:`.record_accumulator`, which keeps each partition's open
:mod:`.producer_batch` (the batch being built, then its futures and outcome); :mod:`.sender`'s thread
drains the ready batches into Produce requests and completes them; :mod:`.delivery_listener` is what the
producer tells someone else of each finished batch (the audit's hook); :mod:`.internal_topic` creates the
topic a publisher sends to when it is missing (the audit topic); :mod:`.producer_config` is the ``[producer]``
section.

It imports the client's metadata and network (:mod:`broker.client.metadata`, :mod:`broker.client.network`),
never the consumer or the groups.
"""
