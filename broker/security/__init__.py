"""Authorization's model (Kafka's ``org.apache.kafka.common.acl`` and ``resource`` packages, and the
matching of ``StandardAuthorizerData``): ACL bindings and filters (:mod:`broker.security.acl_binding`) and an
immutable index of them that answers "may this principal do this?" (:mod:`broker.security.acl_cache`).

Below :mod:`broker.cluster`, which stores the bindings in ZooKeeper, and :mod:`broker.server`, whose
authorizer reads them; it imports nothing of Lumber's but the root exception.
"""
