"""HTTP servers' security, shared by every HTTP endpoint Lumber serves besides the Kafka protocol: the
broker's metrics, the lag exporter and the web console. HTTP Basic authentication against a users file of
salted password hashes (:mod:`~broker.web.users_file`, :mod:`~broker.web.password_hash`), TLS with Python's
:mod:`ssl`, and the rule that a server bound beyond 127.0.0.1 authenticates unless told
``allow_unauthenticated = true`` (:mod:`~broker.web.web_security`); :mod:`~broker.web.basic_auth` checks a
request's ``Authorization`` header, :mod:`~broker.web.wsgi_server` serves a WSGI application with all of it.
"""
