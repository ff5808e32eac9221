"""``lumber acls zookeeper --secure|--unsecure``: the ACLs of znodes that already exist (Kafka's
``zookeeper-security-migration.sh --zookeeper.acl secure|unsecure``).

    lumber acls zookeeper --secure [--dry-run] [--json]     after setting [zookeeper] auth_user
    lumber acls zookeeper --unsecure                        before removing it

``--secure`` gives every znode of Lumber's (the brokers', ``/consumers``, the registry's
``[registry] zookeeper_path``, the ETL's and the lag exporter's) the ACL it would have been created with
under ``[zookeeper] auth_user``; ``--unsecure`` opens them to the world again
(:mod:`broker.cluster.zookeeper_acl_migrator`). Both need ``auth_user`` and its password: the identity that
owns the znodes, which alone may change a secured znode's ACL. Run ``--secure`` after the processes restarted
with ``auth_user`` (so that nothing creates open znodes afterwards); it may be run again. It prints how many
znodes it changed and how many had the ACL already. Exit codes: 0 done, 1 error (ZooKeeper unreachable, a
znode another identity owns), 2 bad input (no ``auth_user``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lumber.cli.cluster_options import add_cluster_options
from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "zookeeper", help="set the ACLs of Lumber's existing znodes for [zookeeper] auth_user, or open them"
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--secure", action="store_true", help="the auth_user's ALL and world READ")
    mode.add_argument("--unsecure", action="store_true", help="world ALL (before turning auth_user off)")
    parser.add_argument("--dry-run", action="store_true", help="count what would change, change nothing")
    add_cluster_options(parser, bootstrap=False)
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.set_defaults(handler=_migrate)


def _migrate(args: argparse.Namespace, config: LumberConfig) -> int:
    from broker.cluster.zookeeper_acl_migrator import BROKER_ROOT_PATHS, ZooKeeperAclMigrator
    from lumber.cli.zookeeper_session import zookeeper_session
    from pipeline.etl_zk_paths import ETL_ROOT
    from pipeline.lag_exporter import HISTORY_PATH

    auth = config.zookeeper.auth()
    if auth is None:
        print(
            "lumber: error: [zookeeper] auth_user is not set: the znodes' ACLs name that user (with its "
            "auth_password_file or auth_password_env), who alone may change them afterwards",
            file=sys.stderr,
        )
        return BAD_INPUT_EXIT_CODE
    roots = [*BROKER_ROOT_PATHS, config.registry.zookeeper_path, ETL_ROOT, HISTORY_PATH]
    with zookeeper_session(args, config) as client:
        done = ZooKeeperAclMigrator(client, auth).migrate(roots, secure=args.secure, dry_run=args.dry_run)
    if args.json:
        print(
            json.dumps(
                {
                    "acl": "secure" if args.secure else "unsecure",
                    "dry_run": args.dry_run,
                    "changed": done.changed,
                    "unchanged": done.unchanged,
                    "missing_roots": list(done.missing_roots),
                }
            )
        )
    else:
        verb = "would change" if args.dry_run else "changed"
        print(
            f"{'secured' if args.secure else 'opened'}: {verb} the ACL of {done.changed} znode(s), "
            f"{done.unchanged} had it already"
        )
    return 0
