"""The broker's storage engine (paper section 3.1): segments, indexes, partition logs, recovery.

Storage only: the record format it stores (record batch v2, compression, the record walker and builder,
``TopicPartition``, topic-name rules) is :mod:`broker.record`, one layer below, which the clients import
too; no client, cluster, schema or pipeline module imports this package. One module per concept, each
on-disk format documented at the top of its module:

* :mod:`~broker.log.index_file`: the body both indexes share (Kafka's ``AbstractIndex``), with
  :mod:`~broker.log.offset_index` (``.index``) and :mod:`~broker.log.time_index` (``.timeindex``);
* :mod:`~broker.log.segment`: one ``.log`` file with its two indexes (a loaded segment's check of them:
  :mod:`~broker.log.segment_headers`); :mod:`~broker.log.segment_framer`: the one framing of a ``.log``
  file into batches, with one set of checks and messages (recovery, ``lumber log verify``, a segment read
  through, the fetch path's header reads at known positions and the log cleaner's reads);
  :mod:`~broker.log.segment_scan`: validating a ``.log`` file batch by batch (a segment's part of recovery);
* :mod:`~broker.log.log_validator`: what produced batches must pass before they are appended;
* :mod:`~broker.log.log`: one partition (append, read, high watermark), its parts mixed in from
  :mod:`~broker.log.log_flush` (the flush policy), :mod:`~broker.log.log_replication` (the replicated high
  watermark, leader epochs, the follower's append), :mod:`~broker.log.log_truncation` and
  :mod:`~broker.log.log_cleanup` (retention, the cleaned segments' swap);
* :mod:`~broker.log.recovery`: loading a partition folder, with crash recovery as numbered passes;
* :mod:`~broker.log.log_manager`: every partition of a broker, the flusher and retention threads;
* :mod:`~broker.log.producer_state`: the idempotent producers' state and its snapshots;
* :mod:`~broker.log.checkpoint`: the recovery-point checkpoint file;
* :mod:`~broker.log.log_verifier`: offline checks of a partition folder (``lumber log verify``);
* :mod:`~broker.log.file_names`: every file-name rule;
* :mod:`~broker.log.file_handle` / :mod:`~broker.log.file_region`: shared descriptors, sendfile regions;
* :mod:`~broker.log.errors`: storage's errors, under :class:`broker.errors.BrokerError`.
"""
