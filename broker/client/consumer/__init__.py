"""The consumer of explicit partitions (paper section 3.2): pull by offset, with background prefetch.

A fetched batch's way up this folder: :mod:`.fetcher`'s thread keeps a Fetch in flight per leader, keeps each
partition's positions and buffered chunks in :mod:`.partition_fetch_state`, and splits a response into
whole, CRC-checked batches with :mod:`.partition_records`; :mod:`.fetched_batch` is one such batch, decoded
only on demand (records, or a column of values); :mod:`.consumer`
(:class:`~broker.client.consumer.consumer.Consumer`) is the API, handing out :mod:`.consumer_record`
records; :mod:`.message_stream` is one stream of a group member, fed by a consumer (the groups use it);
:mod:`.consumer_config` is the ``[consumer]`` section.

It imports the client's metadata and network, never the producer or the groups.
"""
