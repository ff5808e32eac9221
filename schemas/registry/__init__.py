"""The schema registry service: ZooKeeper store, Avro compatibility rules, normalization and the HTTP API.

Importing this package imports nothing heavy: the serde (used inside Spark executors) imports only
:mod:`schemas.avro_schema` and :mod:`schemas.normalize`.
"""
