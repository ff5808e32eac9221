"""The record format, shared by storage, the broker and every client: the bottom of the package layout.

Nothing here knows about files, sockets or ZooKeeper; ``broker/log`` (storage), ``broker/server``,
``broker/client``, the mirror and ``pipeline`` all import it, and it imports none of them. One concept per
module, each format documented at the top of its module:

* :mod:`~broker.record.batch_header`: the record batch v2 header layout, CRC-32C coverage and attributes;
* :mod:`~broker.record.record`: a record's layout, and :class:`~broker.record.record.Record`;
* :mod:`~broker.record.record_batch`: :class:`~broker.record.record_batch.RecordBatch`, a zero-copy view
  of one batch (validate, decode), and the way into record bodies: callers ask the batches, which choose
  the reader (for many batches at once too: ``values_of``, ``key_columns``, ``key_columns_of``);
* :mod:`~broker.record.varint`: zigzag varints (Kafka's varint and varlong);
* :mod:`~broker.record.record_header`: a record's headers (the one ``Header`` type) and their encoding;
* :mod:`~broker.record.compression`: the codecs as Kafka frames them (gzip, xerial snappy, LZ4, zstd);
* :mod:`~broker.record.record_walker`: the one reader of record bodies, with its strategies, used through
  :class:`~broker.record.record_batch.RecordBatch` only (nothing outside this package imports them)
  (:mod:`~broker.record.layout_check` for validation, :mod:`~broker.record.value_columns` for the
  consumer's numpy pass, :mod:`~broker.record.key_columns` for the log cleaner's);
* :mod:`~broker.record.record_batch_builder` and :mod:`~broker.record.record_encoder`: the one builder;
* :mod:`~broker.record.batch_scan`: splitting concatenated batches (fetch responses, produce requests);
  :mod:`~broker.record.batch_header_columns`: their headers as numpy columns instead (the cleaner's
  reads);
* :mod:`~broker.record.topic_partition` and :mod:`~broker.record.topic_name`: the partition key and
  Kafka's topic-name rules;
* :mod:`~broker.record.errors`: the errors, under ``RecordError``.
"""
