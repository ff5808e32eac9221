"""Lumber's Avro schema registry, its client and the Confluent wire serde."""
