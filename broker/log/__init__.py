"""The broker's storage engine (paper section 3.1): record batches, segments, indexes, partition logs.

One module per concept, each on-disk or wire format documented at the top of its module:

* :mod:`~broker.record.record_batch`: record batch v2 (build, view, validate, decode, split buffers);
* :mod:`~broker.record.compression`: the codecs as Kafka frames them (gzip, xerial snappy, LZ4 frame, zstd);
* :mod:`~broker.log.offset_index` (``.index``) and :mod:`~broker.log.time_index` (``.timeindex``);
* :mod:`~broker.log.segment`: one ``.log`` file with its two indexes;
* :mod:`~broker.log.log`: one partition (append, read, flush policy, retention, high watermark);
* :mod:`~broker.log.recovery`: loading a partition folder, with crash recovery as numbered passes;
* :mod:`~broker.log.log_manager`: every partition of a broker, the flusher and retention threads;
* :mod:`~broker.log.checkpoint`: the recovery-point checkpoint file;
* :mod:`~broker.log.file_names`: every file-name rule and Kafka's topic-name rules;
* :mod:`~broker.log.file_handle` / :mod:`~broker.log.file_region`: shared descriptors, sendfile regions;
* :mod:`~broker.log.errors`: the errors, under :class:`broker.errors.BrokerError`.
"""
