"""The declarations of the messages Lumber speaks, one module per API (see :mod:`broker.protocol`).

Field names are Kafka's (``PartitionIndex`` becomes ``partition_index``, as kafka-python names them too) and
each module's fields, versions, nullability, tags and defaults follow Kafka's JSON message definition of the
same name, restricted to the versions Lumber implements.
"""
