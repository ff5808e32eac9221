"""The broker's network layer (Kafka's SocketServer): TCP connections in, requests out, responses back.

One acceptor thread accepts connections and deals them to N processor threads, each with its own selector;
processors frame requests and hand them to handler threads through a :class:`RequestChannel`, and send back
the :class:`NetworkResponse` the handlers give them, record data with ``sendfile``. Handling is not done
here. One module per concept:

* :mod:`~broker.network.socket_server`: :class:`SocketServer`, the threads' life cycle and the stats;
* :mod:`~broker.network.acceptor`: the acceptor thread;
* :mod:`~broker.network.processor`: a processor's loop (its steps and invariants);
* :mod:`~broker.network.inline_serving`: a processor serving requests itself (inline, runs, pipelining);
* :mod:`~broker.network.tls_handshake`, :mod:`~broker.network.ssl_factory`: TLS listeners (the handshake on a
  processor, the server context, the principal of a client certificate);
* :mod:`~broker.network.sasl_serving`, :mod:`~broker.network.sasl_authenticator`,
  :mod:`~broker.network.sasl_server`, :mod:`~broker.network.scram_credential`,
  :mod:`~broker.network.failed_authentications`: SASL listeners (a connection before it is authenticated,
  its Kafka framing, PLAIN and SCRAM, the credentials, throttling failed logins);
* :mod:`~broker.network.session`: who a connection's client is, and through which listener;
* :mod:`~broker.network.connection`: one connection's state (receiving, muted, sending);
* :mod:`~broker.network.network_receive`: reading one size-prefixed request;
* :mod:`~broker.network.response_send`: sending one response's bytes and file regions;
* :mod:`~broker.network.request_channel`: :class:`RequestChannel`, :class:`NetworkRequest`,
  :class:`NetworkResponse`;
* :mod:`~broker.network.selector_wakeup`, :mod:`~broker.network.network_counters`: helpers;
* :mod:`~broker.network.errors`: the errors, under :class:`broker.errors.BrokerError`.

The package imports nothing of its own: each class is imported from its module, so that a client that needs
:mod:`~broker.network.sasl_client` does not load the server's threads.
"""
