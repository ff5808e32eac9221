"""What a client knows of the cluster, and its connections to the brokers it knows.

:mod:`.cluster_snapshot` is the view at one moment (brokers, partition leaders); :mod:`.cluster_metadata`
keeps it fresh from a source: :mod:`.zookeeper_metadata_source` (the paper's registry, section 3.3) or
:mod:`.bootstrap_metadata_source` (Metadata requests to brokers). :mod:`.broker_pool` holds a client's
connections (:mod:`broker.client.network.connection`), at most one per broker, opened on demand.

It imports the client's network (:mod:`broker.client.network`), never the producer, the consumer or the
groups.
"""
