"""Lumber's audit (paper section 4): every tier counts the messages of each topic per window of their
creation time, publishes the counts to the audit topic, and a reconciliation compares the tiers.

The package sits between the clients and the apps: it imports :mod:`broker.client` (to publish and read
the audit topic) and :mod:`schemas` (the events are Avro through the registry), and is imported by the
apps (the mirror, :mod:`pipeline`, the ``lumber`` CLI and console); nothing below it imports it. The Kafka
client knows nothing of it: a producer takes a
:class:`~broker.client.producer.delivery_listener.DeliveryListener`, and the audit's emitter is one.

========================= =================================================================================
``audit_event``           :class:`AuditEvent`, the record of the audit topic (``audit_event.avsc``), ids
``audit_codec``           the events as Confluent-framed Avro through the schema registry
``audit_counter``         the producer tier's counting of what the brokers confirmed
``audit_emitter``         publishing a tier's counts every interval and on close (a delivery listener)
``audit_journal``         the persistent outbox: a tier's counts journaled locally, across ``kill -9``
``audited_producer``      a producer whose ``audit_interval_ms`` is honoured: a producer and its emitter
``audit_publisher``       sending events and waiting for every confirmation (the load tier's publishing)
``audit_reader``          reading every event of the audit topic
``audit_report``          the reconciliation (:func:`reconcile`) and its :class:`AuditReport`
``audit_text``            the report as a terminal table
``audit_html``            the report as one HTML page with charts
``audit_tolerance``       how far a window may be off and still be COMPLETE
``audit_config``          the ``[audit]`` section of ``lumber.toml``
``errors``                :class:`AuditError`, the package's root exception
========================= =================================================================================
"""
