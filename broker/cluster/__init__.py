"""Cluster metadata in ZooKeeper (paper section 3.3): broker registration, topics and their partition
assignment, and each broker's watch on both. The znode layout is in :mod:`broker.cluster.zk_paths`."""
