"""A client's connection to a broker: the bottom of the client, below metadata, producer and consumer.

:mod:`.connection` is one TCP connection (pipelined requests, responses matched by correlation id, the
ApiVersions handshake); the connections of one client are :mod:`broker.client.metadata.broker_pool`'s.

It imports the protocol and the client's errors, nothing else of the client.
"""
