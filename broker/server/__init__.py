"""The broker process: request handling over the log, the network layer and the cluster metadata.

:class:`~broker.server.broker_server.BrokerServer` wires them together; ``lumber broker start`` runs one.
"""
