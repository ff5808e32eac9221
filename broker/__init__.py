"""Lumber's broker: partitioned, segmented, append-only logs served over the Kafka wire protocol."""
