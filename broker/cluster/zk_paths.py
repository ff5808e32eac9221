"""The brokers' and consumer groups' ZooKeeper layout: the one module that names these znodes.

All paths are relative to the chroot of ``[zookeeper] connect``::

    /brokers/ids/<id>                       ephemeral, one per live broker
        {"version": 1, "host": "127.0.0.1", "port": 9092, "timestamp_ms": 1700000000000,
         "endpoints": ["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://broker1.example.com:9094"],
         "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SASL_SSL"}}
        ``endpoints`` are the advertised listeners (Kafka's key and syntax; Metadata answers a client with
        the endpoint of the listener it came in on). ``host``/``port`` are the first PLAINTEXT endpoint, else
        the first endpoint (Kafka writes null and -1 when there is no PLAINTEXT one; Lumber keeps an
        address there for readers that know only host and port). A node without ``endpoints`` (an older
        Lumber) is one PLAINTEXT listener at host:port.
        ("rack": "r1" too when ``[broker] rack`` is set: Kafka's key, read by the reassignment planners)
    /brokers/topics/<topic>                 persistent, the topic's partition -> replicas assignment
        {"version": 1, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}}     (Kafka's node and JSON)
        While partitions move (KIP-455, :mod:`broker.cluster.partition_reassignment`), "partitions" holds
        each one's full replica set RS and two more keys (Kafka's names) the replicas being added and
        removed, only for the partitions moving:
        {"adding_replicas": {"0": [4]}, "partitions": {"0": [4, 1, 2, 3]},
         "removing_replicas": {"0": [1]}, "version": 1}
        Written by TopicAdmin (create, :meth:`~broker.cluster.topic_admin.TopicAdmin.add_partitions`) and
        by the controller (reassignments: a multi with check(/controller_epoch) and a set at the node's
        version read, :mod:`broker.cluster.reassignment_store`).
    /brokers/topics/<topic>/partitions      persistent, no data (Kafka's); parent of one node per partition
    /brokers/topics/<topic>/partitions/<p>  persistent, no data (Kafka's)
    /brokers/topics/<topic>/partitions/<p>/state   persistent, the partition's leader, leader epoch and ISR
        (Kafka's TopicPartitionStateZNode, :class:`~broker.cluster.partition_state.PartitionState`)
        {"controller_epoch": 3, "isr": [1, 2, 3], "leader": 1, "leader_epoch": 0, "version": 1}
        Created with the topic by TopicAdmin (leader = first replica, epoch 0, ISR = replicas), then written
        by the controller (leader elections, fenced by /controller_epoch) and by the leader (ISR changes,
        a set with the node's version). The znode version is the partition's state version: every update
        is conditional on it (:mod:`broker.cluster.partition_state_store`). A topic written by an older
        Lumber has no ``partitions`` node: the controller creates the states
        (:func:`~broker.cluster.partition_state_store.create_missing_states`).
    /controller                             ephemeral, the elected controller (Kafka's ControllerZNode)
        {"brokerid": 1, "timestamp": "1700000000000", "version": 1}
        Created by :class:`~broker.cluster.controller_election.ControllerElection` in one multi with the
        increment of /controller_epoch; deleted when the controller resigns or its session ends.
    /controller_epoch                       persistent, the controller epoch as a decimal string: ``5``
        (Kafka's ControllerEpochZNode). Incremented by each newly elected controller by compare-and-set;
        its znode version fences every controller write: each is a multi that starts with
        ``check(/controller_epoch, version)``, so a controller that lost its office cannot write.
    /config/topics/<topic>                  persistent, the topic's overrides (Kafka's ConfigEntityZNode)
        {"config": {"cleanup.policy": "compact", "min.insync.replicas": "2", "segment.bytes": "1048576"},
         "version": 1}
        Keys: Kafka's topic config names, each listed with what it overrides and takes in
        :data:`~broker.cluster.topic_config.TOPIC_CONFIG_KEYS` (the constants below). Values are strings
        in their checked form. Written with the topic by TopicAdmin (one multi), then replaced as a whole
        by :class:`~broker.cluster.topic_config_store.TopicConfigStore` (AlterConfigs,
        IncrementalAlterConfigs, ``lumber topics alter-config``): a multi of ``check`` on the topic node
        and ``set`` at the config node's version read (``create`` if it has none), so that two
        concurrent alters cannot lose a key and no config outlives a deleted topic. A key with no override
        is absent; an empty ``config`` is a topic without overrides. Every broker watches the node and
        gives the topic's logs their new config (:mod:`broker.server.replica_manager`).
    /config/brokers/<id>                    persistent, a broker's dynamic configs (Kafka's node and JSON);
        Lumber reads only the replication throttle's two rates from it, bytes per second:
        {"config": {"follower.replication.throttled.rate": "1048576",
                    "leader.replication.throttled.rate": "1048576"}, "version": 1}
    /config/throttled_replicas              persistent, **Lumber's own**: every topic's throttled replicas
        (Kafka keeps these two lists in /config/topics/<topic>; Lumber keeps them apart from the topic
        configs it checks), Kafka's keys and ``partition:broker`` lists, or ``*``:
        {"topics": {"t": {"follower.replication.throttled.replicas": "0:3",
                          "leader.replication.throttled.replicas": "0:1"}}, "version": 1}
        Both written by ``lumber cluster reassign --throttle`` (and the commands that move replicas), by
        compare-and-set, removed once the moves are done; read by every broker through watches
        (:mod:`broker.cluster.replication_throttle`).
    /config/users/<name>                    persistent, a SASL user's SCRAM credentials (Kafka's node, JSON)
        {"config": {"SCRAM-SHA-512": "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=8192"},
         "version": 1}
        One entry per mechanism the user may log in with (SCRAM-SHA-256, SCRAM-SHA-512; SASL/PLAIN checks
        the password against either); never the password (:mod:`broker.network.scram_credential` says what
        the values are). Written by ``lumber users add/delete``
        (:class:`~broker.cluster.user_credential_store.UserCredentialStore`: a create, or a set at the
        version read, so two writers cannot lose a mechanism; the node is deleted with its last one). Every
        broker with a SASL listener watches the children and each node
        (:class:`~broker.cluster.credential_cache.CredentialCache`), so a new or changed user can log in
        at once, with no broker restart; Kafka announces the change under /config/changes instead.
    /kafka-acl/..., /kafka-acl-extended/prefixed/..., /kafka-acl-changes, /kafka-acl-extended-changes
        the ACLs and their change notifications, Kafka's layout: drawn in :mod:`broker.cluster.acl_store`
    /admin/preferred_replica_election       persistent, a request for preferred leaders (Kafka's node)
        {"partitions": [{"partition": 0, "topic": "t"}], "version": 1}
        Written by TopicAdmin.request_preferred_election (create; NodeExists: one is pending already);
        the controller moves the leaders and deletes the node.
    /admin/reassign_partitions              persistent, a reassignment asked through ZooKeeper (Kafka's
        ReassignPartitionsZNode and JSON; ``lumber cluster reassign --execute`` writes it, as Kafka's tool
        did before KIP-455):
        {"partitions": [{"partition": 0, "replicas": [4, 2, 3], "topic": "t"}], "version": 1}
        Created by the tool (NodeExists: one is pending: add to it with ``--additional``); the controller
        starts each partition's move (refusing, logging and dropping an entry it cannot start), removes
        each entry once its partition moved, and deletes the node when none is left (Kafka's controller
        does the same, fenced by check(/controller_epoch)).
    /admin/controlled_shutdown/<id>         ephemeral, **Lumber's own**: broker <id> asks the controller to
        move its leaders away before it stops. (Kafka sends a ControlledShutdown request to the controller;
        Lumber asks through ZooKeeper, which every broker already watches.) Written by the stopping broker,
        deleted by it (or with its session) once it is down.
        {"broker": 1, "timestamp_ms": 1700000000000, "version": 1}
    /cluster/id                             persistent, the cluster's id, created by the first broker
        {"version": 1, "id": "lumber-1f0c..."}
    /latest_producer_id_block               persistent, the last block of idempotent producer ids handed
        to a broker (Kafka's node and JSON): each broker claims the next 1000 ids by a compare-and-set on
        the znode version (:mod:`broker.cluster.producer_id_manager`), so no id is given out twice, across
        brokers and restarts
        {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    /consumers/<group>/ids/<consumer-id>    ephemeral, a member and its subscription (topic -> streams)
        {"version": 1, "subscription": {"events": 2}, "host": "web-1", "pid": 4242, "timestamp_ms": ...}
    /consumers/<group>/owners/<topic>/<p>   ephemeral, the id of the member that owns partition p
        {"version": 1, "owner": "<consumer-id>", "stream": 0, "generation": 7}
    /consumers/<group>/offsets/<topic>/<p>  persistent, the next offset the group will consume
        {"version": 1, "offset": 1234, "member": "<consumer-id>", "timestamp_ms": ...}
        (a bare integer, Kafka 0.8's format, is read too)
    /consumers/<group>/leader/<consumer-id>-<seq>   ephemeral sequential, one election candidate per
        member; the lowest sequence number is the group's leader. Data: the member's id.
    /consumers/<group>/assignment           persistent, the generation: the whole assignment, written by
        the leader only (compare-and-set on the znode version, fenced by its candidate node)
        {"version": 1, "generation": 7, "leader": "<consumer-id>", "strategy": "range",
         "timestamp_ms": ..., "assignment": {"<consumer-id>": {"events": [[0, 1], [2]]}}}
        (per member, per topic: the partitions of each of the member's streams)
    /consumers/<group>/rewind               persistent, bumped after offsets were rewound (seek, lumber
        groups reset-offsets), so that the owners reload them
        {"version": 1, "id": "<uuid>", "partitions": {"events": [0, 1]}, "timestamp_ms": ...}

How the group nodes are used is documented in :mod:`broker.client.groups.zookeeper.group_membership`, and each
recipe with its own nodes: ``leader/`` in :mod:`broker.client.groups.zookeeper.fenced_election`, ``ids/`` and
``owners/`` in
:mod:`broker.client.groups.zookeeper.partition_ownership`.

A partition's leader is the leader of its state node while that broker is registered. Data is UTF-8 JSON
with sorted keys (Kafka writes the same keys in no set order); readers ignore keys they do not know, so a
later version may add keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from broker.cluster.partition_state import PartitionState
from broker.endpoint import Endpoint, InvalidListenerError
from broker.record.topic_partition import TopicPartition

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = f"{BROKERS_PATH}/ids"
TOPICS_PATH = f"{BROKERS_PATH}/topics"
CONSUMERS_PATH = "/consumers"
CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_USERS_PATH = "/config/users"
ADMIN_PATH = "/admin"
PREFERRED_REPLICA_ELECTION_PATH = f"{ADMIN_PATH}/preferred_replica_election"
REASSIGN_PARTITIONS_PATH = f"{ADMIN_PATH}/reassign_partitions"
CONTROLLED_SHUTDOWN_PATH = f"{ADMIN_PATH}/controlled_shutdown"

#: The topic config keys Lumber reads from ``/config/topics/<topic>`` (Kafka's names; the table of what
#: each overrides and takes is :data:`broker.cluster.topic_config.TOPIC_CONFIG_KEYS`).
CLEANUP_POLICY = "cleanup.policy"
COMPRESSION_TYPE = "compression.type"
COMPRESSION_GZIP_LEVEL = "compression.gzip.level"
COMPRESSION_LZ4_LEVEL = "compression.lz4.level"
COMPRESSION_ZSTD_LEVEL = "compression.zstd.level"
DELETE_RETENTION_MS = "delete.retention.ms"
MAX_MESSAGE_BYTES = "max.message.bytes"
MESSAGE_TIMESTAMP_TYPE = "message.timestamp.type"
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
RETENTION_BYTES = "retention.bytes"
RETENTION_MS = "retention.ms"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"

#: The ``version`` every JSON value written here carries.
DATA_VERSION = 1


class ZkDataError(ValueError):
    """A znode does not hold what its path says it holds (message names the path and the data)."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    if not topic or "/" in topic:
        raise ValueError(f"not a topic name: {topic!r}")
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def topic_config_path(topic: str) -> str:
    if not topic or "/" in topic:
        raise ValueError(f"not a topic name: {topic!r}")
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def user_config_path(user: str) -> str:
    """``/config/users/<user>``; ValueError for a name that cannot be a znode or a SASL user."""
    if (
        not user
        or len(user) > 256
        or "/" in user
        or user in {".", "..", "zookeeper"}
        or any(ord(c) < 32 or ord(c) == 127 for c in user)
    ):
        raise ValueError(f"not a user name: {user!r} (1-256 characters, no '/' and no control characters)")
    return f"{CONFIG_USERS_PATH}/{user}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN_PATH}/{int(broker_id)}"


def parse_state_path(path: str) -> TopicPartition | None:
    """The partition whose state node ``path`` is; None for any other path."""
    prefix = TOPICS_PATH + "/"
    if not path.startswith(prefix) or not path.endswith("/state"):
        return None
    parts = path[len(prefix) :].split("/")
    if len(parts) != 4 or parts[1] != "partitions" or not parts[2].isdigit():
        return None
    return TopicPartition(parts[0], int(parts[2]))


def group_path(group: str) -> str:
    if not group or "/" in group or group in {".", ".."}:
        raise ValueError(f"not a consumer group name: {group!r}")
    return f"{CONSUMERS_PATH}/{group}"


def group_ids_path(group: str) -> str:
    return f"{group_path(group)}/ids"


def group_member_path(group: str, consumer_id: str) -> str:
    return f"{group_ids_path(group)}/{consumer_id}"


def group_owners_path(group: str, topic: str | None = None) -> str:
    base = f"{group_path(group)}/owners"
    return base if topic is None else f"{base}/{topic}"


def group_owner_path(group: str, topic: str, partition: int) -> str:
    return f"{group_owners_path(group, topic)}/{int(partition)}"


def group_offsets_path(group: str, topic: str | None = None) -> str:
    base = f"{group_path(group)}/offsets"
    return base if topic is None else f"{base}/{topic}"


def group_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{group_offsets_path(group, topic)}/{int(partition)}"


def group_leader_path(group: str) -> str:
    """The election: one ephemeral sequential candidate per member below this node."""
    return f"{group_path(group)}/leader"


def group_candidate_prefix(group: str, consumer_id: str) -> str:
    """What a member's candidate node is created as (ZooKeeper appends a 10-digit sequence number)."""
    return f"{group_leader_path(group)}/{consumer_id}-"


def candidate_sequence(name: str) -> int:
    """The sequence number at the end of a candidate node's name (``<consumer-id>-0000000007`` -> 7)."""
    digits = name[-10:]
    if len(name) < 11 or not digits.isdigit() or name[-11] != "-":
        raise ZkDataError(f"not an election candidate node name: {name!r}")
    return int(digits)


def group_assignment_path(group: str) -> str:
    """The generation node: the leader's whole assignment."""
    return f"{group_path(group)}/assignment"


def group_rewind_path(group: str) -> str:
    return f"{group_path(group)}/rewind"


# ------------------------------------------------------------------------------------------- data


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps({"version": DATA_VERSION, **value}, sort_keys=True, separators=(",", ":")).encode()


def _load(path: str, data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{path}: does not hold JSON ({exc}): {data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ZkDataError(f"{path}: expected a JSON object, found {value!r}")
    return value


def encode_json(value: Mapping[str, Any]) -> bytes:
    """``value`` as this module's JSON (with ``"version"``), for the modules that own a node's data."""
    return _dump(value)


def decode_json(path: str, data: bytes) -> dict[str, Any]:
    """A JSON object from ``path``; :class:`ZkDataError` naming the path if it is not one."""
    return _load(path, data)


def encode_broker(
    host: str, port: int, timestamp_ms: int, endpoints: Sequence[Endpoint] = (), rack: str | None = None
) -> bytes:
    """A ``/brokers/ids/<id>`` node; ``endpoints`` and ``rack`` (Kafka's keys) only when there are some."""
    value: dict[str, Any] = {"host": host, "port": int(port), "timestamp_ms": int(timestamp_ms)}
    if endpoints:
        value["endpoints"] = [str(e) for e in endpoints]
        value["listener_security_protocol_map"] = {
            e.listener_name: e.security_protocol.value for e in endpoints
        }
    if rack:
        value["rack"] = rack
    return _dump(value)


def decode_broker_rack(path: str, data: bytes) -> str | None:
    """The ``rack`` of a ``/brokers/ids/<id>`` node (None: none declared)."""
    rack = _load(path, data).get("rack")
    return rack if isinstance(rack, str) and rack else None


def decode_broker_endpoints(path: str, data: bytes) -> tuple[Endpoint, ...]:
    """The advertised listeners of a ``/brokers/ids/<id>`` node; empty when it has no ``endpoints`` (an
    older Lumber's node: one PLAINTEXT listener at host:port, as
    :meth:`~broker.cluster.broker_info.BrokerInfo.endpoint` reads it)."""
    value = _load(path, data)
    texts = value.get("endpoints")
    if texts is None:
        return ()
    protocols = value.get("listener_security_protocol_map") or {}
    if (
        not isinstance(texts, list)
        or not all(isinstance(t, str) for t in texts)
        or not isinstance(protocols, dict)
    ):
        raise ZkDataError(f"{path}: 'endpoints' is not a list of listeners: {texts!r}")
    try:
        return tuple(Endpoint.parse(text, protocols) for text in texts)
    except InvalidListenerError as exc:
        raise ZkDataError(f"{path}: {exc}") from exc


def decode_broker(path: str, data: bytes) -> tuple[str, int]:
    """``(host, port)`` from a ``/brokers/ids/<id>`` node."""
    value = _load(path, data)
    try:
        host, port = value["host"], value["port"]
    except KeyError as exc:
        raise ZkDataError(f"{path}: expected keys 'host' and 'port', found {sorted(value)}") from exc
    if not isinstance(host, str) or not host or not isinstance(port, int) or not 0 < port < 65536:
        raise ZkDataError(f"{path}: host {host!r} / port {port!r} is not an address")
    return host, port


def encode_assignment(
    assignment: Mapping[int, Sequence[int]],
    moving: Mapping[int, tuple[Sequence[int], Sequence[int]]] | None = None,
) -> bytes:
    """A topic node: partition -> replicas, and for the partitions in ``moving`` (partition ->
    ``(adding, removing)``) Kafka's ``adding_replicas`` and ``removing_replicas`` (left out when empty)."""
    value: dict[str, Any] = {
        "partitions": {str(p): [int(b) for b in assignment[p]] for p in sorted(assignment)}
    }
    moving = moving or {}
    adding = {str(p): [int(b) for b in moving[p][0]] for p in sorted(moving) if moving[p][0]}
    removing = {str(p): [int(b) for b in moving[p][1]] for p in sorted(moving) if moving[p][1]}
    if adding:
        value["adding_replicas"] = adding
    if removing:
        value["removing_replicas"] = removing
    return _dump(value)


def decode_moving(path: str, data: bytes) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Partition -> ``(adding, removing)`` of the partitions a topic node shows moving (none: ``{}``)."""
    value = _load(path, data)
    moving: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    try:
        for index, key in enumerate(("adding_replicas", "removing_replicas")):
            for p, replicas in (value.get(key) or {}).items():
                entry = list(moving.get(int(p), ((), ())))
                entry[index] = tuple(int(b) for b in replicas)
                moving[int(p)] = (entry[0], entry[1])
    except (TypeError, ValueError, AttributeError) as exc:
        raise ZkDataError(f"{path}: adding_replicas/removing_replicas are not partition -> replicas") from exc
    return moving


def decode_assignment(path: str, data: bytes) -> dict[int, tuple[int, ...]]:
    """Partition -> replicas from a ``/brokers/topics/<topic>`` node; partitions must be 0..n-1."""
    value = _load(path, data)
    try:
        raw = value["partitions"]
        assignment = {int(p): tuple(int(b) for b in replicas) for p, replicas in raw.items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ZkDataError(f"{path}: is not a partition assignment: {value!r}") from exc
    if not assignment or sorted(assignment) != list(range(len(assignment))):
        raise ZkDataError(
            f"{path}: assigns partitions {sorted(assignment)}, expected 0 to {len(assignment) - 1}"
        )
    return assignment


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"id": cluster_id})


def decode_cluster_id(path: str, data: bytes) -> str:
    value = _load(path, data).get("id")
    if not isinstance(value, str) or not value:
        raise ZkDataError(f"{path}: expected a non-empty 'id', found {value!r}")
    return value


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    """Kafka's JSON: the ids as strings (they are int64), ``block_end`` inclusive."""
    return _dump({"broker": int(broker_id), "block_start": str(block_start), "block_end": str(block_end)})


def decode_producer_id_block(path: str, data: bytes) -> tuple[int, int, int]:
    """``(broker, block_start, block_end)`` from ``/latest_producer_id_block``."""
    value = _load(path, data)
    try:
        broker, start, end = int(value["broker"]), int(value["block_start"]), int(value["block_end"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkDataError(f"{path}: is not a producer id block: {value!r}") from exc
    if not 0 <= start <= end:
        raise ZkDataError(f"{path}: block [{start}, {end}] is not a range of producer ids")
    return broker, start, end


def encode_partition_state(state: PartitionState) -> bytes:
    """Kafka's state JSON (``zk_version`` is the znode's, not data)."""
    return _dump(
        {
            "controller_epoch": int(state.controller_epoch),
            "isr": [int(b) for b in state.isr],
            "leader": int(state.leader),
            "leader_epoch": int(state.leader_epoch),
        }
    )


def decode_partition_state(path: str, data: bytes, zk_version: int) -> PartitionState:
    """A :class:`PartitionState` from a state node read at znode version ``zk_version``."""
    value = _load(path, data)
    try:
        fields = (value["leader"], value["leader_epoch"], value["controller_epoch"])
        isr = value["isr"]
    except KeyError as exc:
        raise ZkDataError(
            f"{path}: expected keys 'controller_epoch', 'isr', 'leader', 'leader_epoch', "
            f"found {sorted(value)}"
        ) from exc
    if (
        not all(type(f) is int for f in fields)
        or not isinstance(isr, list)
        or not all(type(b) is int for b in isr)
    ):
        raise ZkDataError(f"{path}: is not a partition state: {value!r}")
    leader, leader_epoch, controller_epoch = fields
    return PartitionState(leader, leader_epoch, tuple(isr), controller_epoch, zk_version)


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """Kafka's ``/controller`` JSON: ``timestamp`` is a string of milliseconds."""
    return _dump({"brokerid": int(broker_id), "timestamp": str(int(timestamp_ms))})


def decode_controller(path: str, data: bytes) -> int:
    """The controller's broker id from ``/controller``."""
    broker_id = _load(path, data).get("brokerid")
    if type(broker_id) is not int or broker_id < 0:
        raise ZkDataError(f"{path}: expected a broker id in 'brokerid', found {broker_id!r}")
    return broker_id


def encode_controller_epoch(epoch: int) -> bytes:
    """Kafka's ``/controller_epoch``: the epoch as a decimal string, no JSON."""
    return str(int(epoch)).encode()


def decode_controller_epoch(path: str, data: bytes) -> int:
    text = data.decode("utf-8", errors="replace").strip()
    if not text.isdigit():
        raise ZkDataError(f"{path}: expected a controller epoch (a decimal number), found {data[:100]!r}")
    return int(text)


def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    """Kafka's ``/config/topics/<topic>`` JSON: every value a string."""
    return _dump({"config": {str(k): str(v) for k, v in sorted(configs.items())}})


def decode_topic_config(path: str, data: bytes) -> dict[str, str]:
    config = _load(path, data).get("config")
    if not isinstance(config, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
        raise ZkDataError(f"{path}: expected 'config' to map names to strings, found {config!r}")
    return dict(config)


def encode_preferred_election(partitions: Sequence[TopicPartition]) -> bytes:
    """Kafka's ``/admin/preferred_replica_election`` JSON, partitions sorted."""
    return _dump(
        {"partitions": [{"partition": tp.partition, "topic": tp.topic} for tp in sorted(set(partitions))]}
    )


def decode_preferred_election(path: str, data: bytes) -> list[TopicPartition]:
    value = _load(path, data)
    try:
        found = sorted({TopicPartition(str(e["topic"]), int(e["partition"])) for e in value["partitions"]})
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkDataError(f"{path}: is not a list of partitions: {value!r}") from exc
    return found


def encode_reassign_partitions(targets: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """Kafka's ``/admin/reassign_partitions`` JSON (and its tool's plan file), partitions sorted."""
    return _dump(
        {
            "partitions": [
                {"partition": tp.partition, "replicas": [int(b) for b in targets[tp]], "topic": tp.topic}
                for tp in sorted(targets)
            ]
        }
    )


def decode_reassign_partitions(path: str, data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    """Partition -> target replicas from ``/admin/reassign_partitions`` (or a plan file named ``path``);
    :class:`ZkDataError` naming the entry that is not one, or a partition named twice."""
    value = _load(path, data)
    entries = value.get("partitions")
    if not isinstance(entries, list):
        raise ZkDataError(f"{path}: expected a list 'partitions', found {entries!r}")
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for index, entry in enumerate(entries):
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = entry["replicas"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ZkDataError(
                f"{path}: partitions[{index}] is not {{'topic', 'partition', 'replicas': [broker ids]}}: "
                f"{entry!r}"
            ) from exc
        if not isinstance(replicas, list) or not all(type(b) is int for b in replicas):
            raise ZkDataError(f"{path}: partitions[{index}] ({tp}): replicas {replicas!r} are not broker ids")
        if tp in targets:
            raise ZkDataError(f"{path}: partitions[{index}]: {tp} is named twice")
        targets[tp] = tuple(replicas)
    return targets


def encode_controlled_shutdown(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"broker": int(broker_id), "timestamp_ms": int(timestamp_ms)})


def encode_user_config(credentials: Mapping[str, str]) -> bytes:
    """Kafka's ``/config/users/<name>`` JSON: mechanism -> credential text."""
    return _dump({"config": {str(k): str(v) for k, v in sorted(credentials.items())}})


def decode_user_config(path: str, data: bytes) -> dict[str, str]:
    config = _load(path, data).get("config")
    if not isinstance(config, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
        raise ZkDataError(f"{path}: expected 'config' to map mechanisms to credentials")
    return dict(config)
