"""The web console (``lumber console``): cluster, topics, groups, schemas, loads and the audit at a glance.

Server-rendered HTML pages (FastAPI, no JavaScript), charts as inline SVG; every page has a JSON twin
(``?format=json``). The console keeps no state of its own: each request reads ZooKeeper, the brokers, the
registry and the load job's manifests afresh (:mod:`lumber.console.sources`), so it can be restarted,
or run twice, at any time.

========================================== =================================================================
``/``                                      cluster: brokers, topics, partitions, leader, replicas, offsets
``/topics/{topic}``                        a topic's partitions and records (``?partition=&offset=|time=``)
``/topics/{topic}/{partition}/{offset}``   one record; ``.../value`` its value decoded, as JSON
``/groups``, ``/groups/{group}``           consumer groups: members, owners, committed offsets, lag, lag
                                           over time (``?history=1h``)
``/schemas``, ``/schemas/{subject}``       subjects, versions, compatibility level; ``/diff`` between two
``/schemas/ids/{id}``                      the schema of an id and the subject versions holding it
``/loads``                                 the load job's runs and the warehouse tree per topic and hour
``/audit``, ``/audit/{topic}/{start_ms}``  the completeness heatmap; one window's counts
========================================== =================================================================

Who may see and act: with ``[console] users_file`` every request needs a user (HTTP Basic), role ``read``
sees, ``admin`` also resets offsets; ``ssl_certfile`` serves HTTPS; beyond 127.0.0.1 the console refuses to
start without users unless ``allow_unauthenticated = true`` (:mod:`~lumber.console.console_auth`,
:mod:`broker.web`, docs/security.md).

Modules: :mod:`~lumber.console.app` builds the application; one ``*_pages`` module per page group; the
readers (:mod:`~lumber.console.cluster_reader`, :mod:`~lumber.console.record_reader`,
:mod:`~lumber.console.warehouse_reader`, and for a group's lag history
:mod:`~lumber.console.offsets_topic_reader` and :mod:`~lumber.console.lag_exporter_reader`, into
:mod:`~lumber.console.lag_history`) fetch what the pages show; :mod:`~lumber.console.page` lays
pages out and answers HTML or JSON; :mod:`~lumber.console.svg` draws the charts.
"""
