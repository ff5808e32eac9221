"""One broker: the log manager, the cluster metadata in ZooKeeper, the request handlers and the network layer.

Start-up, in order (each step undone if a later one fails):

1. connect to ZooKeeper; refuse at once if a live broker already holds ``/brokers/ids/<id>``;
2. open the log dirs (locking them, recovering a crashed shutdown: :mod:`broker.log.log_manager`);
3. read the cluster id (``/cluster/id``, created by the first broker) and start the cluster watcher;
   delete local partitions ZooKeeper no longer assigns here, give the logs of topics with config
   overrides their topic's config, create the logs of the partitions assigned here and apply their states
   (lead, or follow: the replica fetchers start);
4. start the ISR thread, the flusher and retention threads, the purgatory, the group coordinator (which
   loads the ``__consumer_offsets`` partitions led here), the request handlers and the network layer
   (bound before anything is registered, so the registered port answers);
5. register ``/brokers/ids/<id>`` (ephemeral): from now on clients find the broker, and the controller
   counts it live;
6. stand for controller (:mod:`broker.server.controller`);
7. freeze what start-up made out of the garbage collector's walks (:mod:`broker.server.garbage_collection`).

:meth:`BrokerServer.shutdown` undoes them in reverse, after a **controlled shutdown** (``[broker]
controlled_shutdown``): the broker asks the controller to move the leadership of its partitions to other
in-sync replicas and waits for it (bounded by ``shutdown_timeout_ms``), so that clients switch leaders
without a failed request; then it resigns as controller, stops its fetchers, deregisters, stops accepting
and reading, answers the waiting requests, flushes and closes every log (a clean shutdown needs no
recovery next time) and closes the ZooKeeper session. Not thread-safe: one thread starts and stops it.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from prometheus_client import make_wsgi_app

from broker.cluster import partition_state_store, zk_paths
from broker.cluster.acl_watcher import AclWatcher
from broker.cluster.broker_registration import BrokerRegistration
from broker.cluster.cluster_view import EMPTY_VIEW, ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.credential_cache import CredentialCache
from broker.cluster.producer_id_manager import ProducerIdManager
from broker.cluster.replication_throttle import ReplicationThrottle
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.topic_config_store import TopicConfigStore
from broker.cluster.zookeeper_auth import ZooKeeperAuth, new_zookeeper_client
from broker.config import BrokerConfig, LogConfig
from broker.endpoint import Endpoint, SecurityProtocol
from broker.log.log_manager import LogManager
from broker.network.errors import NetworkError
from broker.network.failed_authentications import FailedAuthentications
from broker.network.request_channel import InlineHandler, RequestChannel
from broker.network.sasl_authenticator import SaslSettings
from broker.network.socket_server import SocketServer
from broker.network.ssl_factory import server_ssl_context
from broker.protocol import compile_all
from broker.server.admin_manager import AdminManager
from broker.server.authorizer import AclAuthorizer
from broker.server.broker_metrics import BrokerCollector, BrokerMetrics, MeteredRequestChannel
from broker.server.controller import Controller
from broker.server.errors import ServerError
from broker.server.garbage_collection import GarbageCollection
from broker.server.group.group_coordinator import GroupCoordinator
from broker.server.group.group_metadata_manager import GroupMetadataManager
from broker.server.handler_pool import HandlerPool
from broker.server.kafka_apis import INLINE_API_KEYS, PIPELINE_API_KEYS, RUN_API_KEYS, KafkaApis
from broker.server.purgatory import Purgatory
from broker.server.reassignment_apis import Alter
from broker.server.replica_manager import ReplicaManager
from broker.web.web_security import WebSecurity
from broker.web.wsgi_server import WsgiServer

logger = logging.getLogger(__name__)


def metrics_security(config: BrokerConfig) -> WebSecurity:
    """How the broker's metrics endpoint is secured: ``[broker] host`` and ``metrics_*``."""
    return WebSecurity(
        f"broker {config.broker_id}'s metrics",
        "broker",
        config.host,
        users_file=config.metrics_users_file,
        ssl_certfile=config.metrics_ssl_certfile,
        ssl_keyfile=config.metrics_ssl_keyfile,
        allow_unauthenticated=config.metrics_allow_unauthenticated,
        prefix="metrics_",
    )


class BrokerStartupError(ServerError):
    """The broker cannot start: ZooKeeper unreachable, its id taken, its log dirs locked or unreadable."""


@dataclass(frozen=True)
class ZooKeeperSettings:
    """How the broker reaches ZooKeeper (``[zookeeper]`` of ``lumber.toml``)."""

    connect: str
    session_timeout_ms: int = 10_000
    connect_timeout_ms: int = 15_000
    #: the digest identity the broker authenticates as and creates its znodes for (None: the process's)
    auth: ZooKeeperAuth | None = None


class BrokerServer:
    """A broker process's parts, started and stopped in order (see the module docstring)."""

    def __init__(self, config: BrokerConfig, log_config: LogConfig, zookeeper: ZooKeeperSettings) -> None:
        self.config = config
        self._log_config = log_config
        self._zookeeper = zookeeper
        self._stopped = threading.Event()
        self._started = False
        self._client: KazooClient | None = None
        self._logs: LogManager | None = None
        self._watcher: ClusterWatcher | None = None
        self._purgatory: Purgatory | None = None
        self._replicas: ReplicaManager | None = None
        self._controller: Controller | None = None
        self._groups: GroupCoordinator | None = None
        self._channel: RequestChannel | None = None
        self._pool: HandlerPool | None = None
        self._networks: list[SocketServer] = []
        self._credentials: CredentialCache | None = None
        self._acls: AclWatcher | None = None
        self._registration: BrokerRegistration | None = None
        self._metrics_server: Any = None
        self.cluster_id = ""

    @property
    def port(self) -> int:
        """The bound port of the first listener."""
        if not self._networks:
            raise ServerError("the broker is not started")
        return self._networks[0].port

    @property
    def advertised_endpoints(self) -> list[Endpoint]:
        """Every listener as advertised, an advertised port 0 replaced by the bound port."""
        if not self._networks:
            raise ServerError("the broker is not started")
        return [
            endpoint.with_port(network.port) if endpoint.port == 0 else endpoint
            for endpoint, network in zip(self.config.advertised_endpoints, self._networks, strict=True)
        ]

    def _ssl_context(self) -> ssl.SSLContext | None:
        """The TLS listeners' context (:mod:`broker.network.ssl_factory`); None without a TLS listener."""
        config = self.config
        if not any(e.security_protocol.uses_tls for e in config.listener_endpoints):
            return None
        try:
            return server_ssl_context(
                certfile=config.ssl_certfile,
                keyfile=config.ssl_keyfile,
                cafile=config.ssl_cafile,
                client_auth=config.ssl_client_auth,
                ciphers=config.ssl_ciphers,
                min_version=config.ssl_min_version,
            )
        except NetworkError as exc:
            raise BrokerStartupError(f"[broker] ssl: {exc}") from exc

    def _sasl_settings(self, client: KazooClient) -> SaslSettings | None:
        """The SASL listeners' settings, the users' credentials watched in ZooKeeper; None without one."""
        config = self.config
        if not any(e.security_protocol.uses_sasl for e in config.listener_endpoints):
            return None
        cache = self._credentials = CredentialCache(client)
        try:
            cache.start()
        except (KazooException, KazooTimeoutError) as exc:
            raise BrokerStartupError(
                f"cannot read the SASL users ({zk_paths.CONFIG_USERS_PATH}): {exc!r}"
            ) from exc
        return SaslSettings(
            tuple(config.sasl_enabled_mechanisms),
            cache.lookup,
            FailedAuthentications(
                config.sasl_max_failed_authentications, config.sasl_failed_authentication_window_ms / 1000
            ),
        )

    def _authorizer(self, client: KazooClient) -> AclAuthorizer | None:
        """The ACL authorizer (``[broker] authorizer = "acl"``), its ACLs followed in ZooKeeper; else None."""
        config = self.config
        if config.authorizer != "acl":
            return None
        watcher = self._acls = AclWatcher(client)
        try:
            watcher.start()
        except (KazooException, KazooTimeoutError) as exc:
            raise BrokerStartupError(f"cannot read the ACLs from ZooKeeper: {exc!r}") from exc
        principal = config.inter_broker_principal
        if principal is not None and principal not in config.super_users:
            logger.warning(
                "broker %d: the brokers log in to each other as %s, which is not in [broker] super_users: "
                "replication needs CLUSTER_ACTION on the cluster for it",
                config.broker_id,
                principal,
            )
        return AclAuthorizer(
            acls=lambda: watcher.cache,
            super_users=config.super_users,
            allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
        )

    def _network_stats(self) -> dict[str, int]:
        """The network counters summed over the listeners."""
        total: dict[str, int] = {}
        for network in list(self._networks):
            for key, value in network.stats().items():
                total[key] = total.get(key, 0) + value
        return total

    def _stop_networks(self) -> None:
        for network in self._networks:
            network.shutdown()

    @property
    def log_manager(self) -> LogManager:
        if self._logs is None:
            raise ServerError("the broker is not started")
        return self._logs

    def start(self) -> None:
        config = self.config
        try:
            self._start()
        except BaseException:
            self.shutdown()
            raise
        self._started = True
        GarbageCollection.settle()  # what start-up made is never walked again: no full-collection pauses
        logger.info(
            "broker %d of cluster %s is up on %s (advertised as %s), zookeeper %s, log dirs %s",
            config.broker_id,
            self.cluster_id,
            ", ".join(
                f"{e.listener_name}://{e.host}:{n.port}"
                for e, n in zip(config.listener_endpoints, self._networks, strict=True)
            ),
            ", ".join(str(e) for e in self.advertised_endpoints),
            self._zookeeper.connect,
            ", ".join(self._log_config.log_dirs),
        )

    def _start(self) -> None:
        config = self.config
        if config.metrics_listen_port is not None:
            # before anything binds: a metrics endpoint open to the network is refused at once (a config
            # error, WebSecurityError: exit 2 from `lumber broker start`)
            for warning in metrics_security(config).check():
                logger.warning("%s", warning)
        where = f"zookeeper {self._zookeeper.connect}"
        client = new_zookeeper_client(
            hosts=self._zookeeper.connect,
            timeout=self._zookeeper.session_timeout_ms / 1000,
            auth=self._zookeeper.auth,
        )
        try:
            client.start(timeout=self._zookeeper.connect_timeout_ms / 1000)
        except (KazooTimeoutError, KazooException) as exc:
            client.close()
            raise BrokerStartupError(f"{where}: cannot connect: {exc!r}") from exc
        self._client = client
        self._check_id_free(client)

        compile_all()
        self._logs = LogManager(self._log_config, producer_id_expiration_ms=config.producer_id_expiration_ms)
        self.cluster_id = self._cluster_id(client)
        # the purgatory is watched before any log changes, so that no completion goes unnoticed
        self._purgatory = Purgatory(f"broker-{config.broker_id}")
        self._logs.add_listener(self._purgatory.notify)
        self._watcher = ClusterWatcher(client, on_change=self._on_cluster_change)
        throttle = ReplicationThrottle(client, config.broker_id)
        self._replicas = replicas = ReplicaManager(
            config.broker_id,
            self._logs,
            self._watcher,
            self._purgatory,
            config=config,
            isr_store=lambda changes: partition_state_store.update_isrs(client, changes),
            throttle=throttle,
        )
        throttle.start()
        self._watcher.start()
        strays = replicas.remove_strays(self._watcher.view)
        if strays:
            logger.warning("broker %d removed %d stray partitions: %s", config.broker_id, len(strays), strays)
        replicas.apply(EMPTY_VIEW, self._watcher.view)
        replicas.start()
        self._logs.start()
        self._groups = groups = GroupCoordinator(
            config,
            GroupMetadataManager(config.broker_id, config, replicas, self._watcher, TopicAdmin(client)),
        )
        groups.start()
        groups.manager.on_leadership()
        metrics = BrokerMetrics() if config.metrics_listen_port is not None else None
        if metrics is not None:
            self._logs.add_flush_listener(metrics.flushed)
        self._channel = (
            RequestChannel(queue_size=config.queued_max_requests)
            if metrics is None
            else MeteredRequestChannel(metrics, queue_size=config.queued_max_requests)
        )
        handler = KafkaApis(
            config=config,
            controller=self._active_controller,
            replica_manager=replicas,
            admin_manager=AdminManager(
                TopicAdmin(client),
                self._watcher,
                config.num_partitions,
                config.default_replication_factor,
                configs=TopicConfigStore(client),
                broker_config=config,
                log_config=self._log_config,
            ),
            cluster=self._watcher,
            channel=self._channel,
            cluster_id=self.cluster_id,
            producer_ids=ProducerIdManager(client, config.broker_id),
            group_coordinator=groups,
            authorizer=self._authorizer(client),
            acl_watcher=self._acls,
        )
        self._pool = HandlerPool(self._channel, handler.handle, config.num_io_threads)
        self._pool.start()
        inline = (
            InlineHandler(
                handler.handle,
                INLINE_API_KEYS,
                handler.handle_run,
                RUN_API_KEYS,
                PIPELINE_API_KEYS,
                handler.handle_pipelined,
                replicas.completing_here,
            )
            if config.inline_requests
            else None
        )
        ssl_context = self._ssl_context()
        sasl = self._sasl_settings(client)
        for endpoint in config.listener_endpoints:
            network = SocketServer(
                self._channel,
                host=endpoint.host,
                port=endpoint.port,
                num_processors=config.num_network_threads,
                max_request_bytes=config.socket_request_max_bytes,
                connections_max_idle_ms=config.connections_max_idle_ms,
                name=f"broker-{config.broker_id}",
                inline=inline,
                listener_name=endpoint.listener_name,
                security_protocol=endpoint.security_protocol,
                ssl_context=ssl_context if endpoint.security_protocol.uses_tls else None,
                sasl=sasl if endpoint.security_protocol.uses_sasl else None,
            )
            self._networks.append(network)
            try:
                network.start()
            except NetworkError as exc:
                raise BrokerStartupError(f"cannot listen on {endpoint}: {exc}") from exc
        port = config.metrics_listen_port
        if metrics is not None and port is not None:
            collector = BrokerCollector(
                config.broker_id,
                self._logs,
                self._purgatory,
                self._network_stats,
                replicas=self._replicas,
                controller_active=lambda: self._controller is not None and self._controller.active,
                controller_stats=lambda: None if self._controller is None else self._controller.stats(),
                fetch_sessions=handler.fetch_sessions,
            )
            self._serve_metrics(metrics, port, collector)
        advertised = self.advertised_endpoints
        plaintext = [e for e in advertised if e.security_protocol is SecurityProtocol.PLAINTEXT]
        default = (plaintext or advertised)[0]
        self._registration = BrokerRegistration(
            client, config.broker_id, default.host, default.port, endpoints=advertised, rack=config.rack
        )
        self._registration.register()
        self._controller = Controller(client, config.broker_id, config, self._watcher)
        self._controller.start()

    def _active_controller(self) -> Alter | None:
        """The controller's reassignment entry while this broker is the active controller."""
        controller = self._controller
        return controller.alter_reassignments if controller is not None and controller.active else None

    def _on_cluster_change(self, old: ClusterView, new: ClusterView) -> None:
        replicas = self._replicas
        if replicas is not None:
            replicas.apply(old, new)
        groups = self._groups
        if groups is not None:
            groups.manager.on_leadership()
        controller = self._controller
        if controller is not None:
            controller.wake()

    def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership off this broker, and wait (bounded) until it has: every
        partition led here with another live in-sync replica has a new leader, and this broker has left the
        ISR of the partitions it follows, so that no acks=all produce waits for it (Kafka's controlled
        shutdown; Lumber asks through ``/admin/controlled_shutdown/<id>``, see zk_paths)."""
        client, watcher, config = self._client, self._watcher, self.config
        if client is None or watcher is None or not config.controlled_shutdown:
            return
        me = config.broker_id

        def moved(view: ClusterView) -> bool:
            """No partition is led here that another live in-sync replica could lead, and no leader
            elsewhere waits for this broker as an in-sync follower."""
            live = set(view.brokers) - set(view.shutting_down)
            return not any(
                (state.leader == me and any(r != me and r in live for r in state.isr))
                or (state.leader != me and state.leader in live and me in state.isr)
                for state in view.states.values()
            )

        if moved(watcher.view):
            return
        started = time.monotonic()
        path = zk_paths.controlled_shutdown_path(me)
        try:
            client.create(
                path,
                zk_paths.encode_controlled_shutdown(me, int(time.time() * 1000)),
                ephemeral=True,
                makepath=True,
            )
        except NodeExistsError:
            pass
        except (KazooException, KazooTimeoutError) as exc:
            logger.warning("broker %d: cannot ask for a controlled shutdown (%r): stopping without", me, exc)
            return
        timeout_s = config.shutdown_timeout_ms / 1000
        if watcher.wait_for(moved, timeout_s):
            logger.info(
                "broker %d: leadership moved to other replicas in %.0f ms (controlled shutdown)",
                me,
                (time.monotonic() - started) * 1000,
            )
        else:
            logger.warning(
                "broker %d: controlled shutdown: leadership not moved within %.1f s; stopping anyway",
                me,
                timeout_s,
            )

    def _serve_metrics(self, metrics: BrokerMetrics, port: int, collector: BrokerCollector) -> None:
        """GET /metrics on ``host:metrics port`` (broker/server/broker_metrics.py), behind the users and TLS
        of ``[broker] metrics_*`` (:func:`metrics_security`); a port that cannot be bound leaves the broker
        up without metrics, with an error in its log. A users file or certificate that cannot be read stops
        the start (a config error)."""
        metrics.registry.register(collector)
        security = metrics_security(self.config)
        try:  # a users file or certificate that cannot be read raises WebSecurityError: the start fails
            server = WsgiServer(make_wsgi_app(metrics.registry), port, security, "broker-metrics")
        except OSError as exc:
            logger.error(  # noqa: TRY400 - the traceback adds nothing to "address in use"
                "broker %d: cannot serve metrics on %s:%s (%s): metrics are off; set [broker] metrics_port "
                "(0: off)",
                self.config.broker_id,
                self.config.host,
                port,
                exc,
            )
            return
        self._metrics_server = server
        logger.info("broker %d: metrics on %s/metrics", self.config.broker_id, server.url)

    def _stop_metrics(self) -> None:
        server, self._metrics_server = self._metrics_server, None
        if server is not None:
            server.stop()

    def _check_id_free(self, client: KazooClient) -> None:
        """Refuse to start while a live broker holds our id. A registration left by this broker's own
        crash vanishes once ZooKeeper expires that session, so it is waited for, up to a session timeout."""
        path = zk_paths.broker_path(self.config.broker_id)
        deadline = time.monotonic() + self._zookeeper.session_timeout_ms / 1000 + 2.0
        warned = False
        while True:
            try:
                data, _ = client.get(path)
            except NoNodeError:
                return
            except KazooException as exc:
                raise BrokerStartupError(
                    f"zookeeper {self._zookeeper.connect}: cannot read {path}: {exc!r}"
                ) from exc
            try:
                host, port = zk_paths.decode_broker(path, data)
                holder = f"{host}:{port}"
            except zk_paths.ZkDataError:
                holder = repr(data[:100])
            if time.monotonic() >= deadline:
                raise BrokerStartupError(
                    f"broker id {self.config.broker_id} is taken: {path} in zookeeper "
                    f"{self._zookeeper.connect} is registered by a live broker at {holder}; give this broker "
                    "another [broker] broker_id"
                )
            if not warned:
                logger.warning(
                    "broker id %d is registered by %s: waiting up to %.0f s for that session to expire "
                    "(a broker that crashed leaves its registration behind until then)",
                    self.config.broker_id,
                    holder,
                    deadline - time.monotonic(),
                )
                warned = True
            time.sleep(0.25)

    def _cluster_id(self, client: KazooClient) -> str:
        path = zk_paths.CLUSTER_ID_PATH
        try:
            client.ensure_path(path.rsplit("/", 1)[0])
            with contextlib.suppress(NodeExistsError):
                client.create(path, zk_paths.encode_cluster_id("lumber-" + secrets.token_hex(8)))
            data, _ = client.get(path)
        except KazooException as exc:
            raise BrokerStartupError(
                f"zookeeper {self._zookeeper.connect}: cannot read {path}: {exc!r}"
            ) from exc
        try:
            return zk_paths.decode_cluster_id(path, data)
        except zk_paths.ZkDataError as exc:
            raise BrokerStartupError(str(exc)) from exc

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until :meth:`shutdown`; True if it happened within ``timeout_s``."""
        return self._stopped.wait(timeout_s)

    def shutdown(self) -> None:
        """Stop everything that was started, in reverse order; idempotent."""
        steps = (
            ("moving leadership away", self._controlled_shutdown if self._registration else None),
            ("stopping the controller", self._controller.stop if self._controller else None),
            ("stopping the group coordinator", self._groups.shutdown if self._groups else None),
            ("stopping the replica fetchers", self._replicas.shutdown if self._replicas else None),
            ("deregistering", self._registration.deregister if self._registration else None),
            ("stopping the metrics server", self._stop_metrics if self._metrics_server else None),
            ("stopping the network layer", self._stop_networks if self._networks else None),
            ("answering waiting requests", self._purgatory.shutdown if self._purgatory else None),
            ("stopping the request handlers", self._pool.shutdown if self._pool else None),
            ("closing the request channel", self._channel.close if self._channel else None),
            ("stopping the cluster watcher", self._watcher.stop if self._watcher else None),
            ("stopping the credential cache", self._credentials.stop if self._credentials else None),
            ("stopping the ACL watcher", self._acls.stop if self._acls else None),
            ("closing the logs", self._logs.close if self._logs else None),
            ("closing the zookeeper session", self._close_client if self._client else None),
        )
        for what, step in steps:
            if step is None:
                continue
            try:
                step()
            except Exception:
                logger.exception("broker %d: %s failed", self.config.broker_id, what)
        self._networks = []
        self._registration = self._purgatory = self._pool = self._replicas = None
        self._controller = self._groups = None
        self._channel = self._watcher = self._logs = self._client = None
        self._credentials = self._acls = None
        if self._started:
            logger.info("broker %d stopped", self.config.broker_id)
            self._started = False
        self._stopped.set()

    def _close_client(self) -> None:
        client = self._client
        if client is not None:
            try:
                client.stop()
            finally:
                client.close()
