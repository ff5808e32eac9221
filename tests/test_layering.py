"""The package layering of issue 18, read from the source: imports point down the table, never back up.

Each package has a rank; a module may import a package of a lower rank, or of its own rank as long as no
two packages import each other (directly or around a longer loop). Every import counts, those inside
functions and under ``TYPE_CHECKING`` too: a late import is still a dependency.

The order is the one DESIGN.md and the helpers' brief give (record -> log -> network/server ->
clients -> audit -> apps -> the app), with the broker's ZooKeeper registries (``broker.cluster``) below the
server, which registers through them (as Kafka's ``KafkaZkClient`` sits below ``KafkaServer``), and the
schema registry's server (``schemas.registry``) above its client side (``schemas``). A package that is not
in the table fails the test, so that a new one is placed on purpose.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("broker", "schemas", "audit", "mirror", "pipeline", "lumber", "jobs")

RANKS: dict[str, int] = {
    # the broker's own top-level modules (config sections, the root exception, the clock) and the record
    # format: imported by everything, importing nothing of Lumber's above them
    "broker": 0,
    "broker.record": 0,
    "broker.log": 1,
    # the ACL model (bindings, filters, the matching index): below the ZooKeeper store and the authorizer
    "broker.security": 2,
    "broker.protocol": 2,
    "broker.network": 3,
    "broker.cluster": 3,
    "broker.web": 3,
    "broker.server": 4,
    "broker.client": 5,
    "schemas": 5,
    "schemas.registry": 6,
    "audit": 7,
    "mirror": 8,
    "pipeline": 8,
    "lumber": 9,
    "jobs": 9,
}


def package_of(module: str) -> str:
    """The layering unit of a module: a subpackage of ``broker``, ``schemas.registry``, else its top level."""
    parts = module.split(".")
    if parts[0] == "broker" and len(parts) > 1 and (ROOT / "broker" / parts[1]).is_dir():
        return f"broker.{parts[1]}"
    if parts[:2] == ["schemas", "registry"]:
        return "schemas.registry"
    return parts[0]


def module_imports() -> dict[str, set[str]]:
    """Every module of the tree -> the modules (of the tree) it imports."""
    imports: dict[str, set[str]] = {}
    for top in TOP_LEVEL:
        for path in sorted((ROOT / top).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            imports[module] = set()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                else:
                    continue
                imports[module].update(name for name in names if name.split(".")[0] in TOP_LEVEL)
    return imports


def import_graph() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the modules that import it."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module, names in module_imports().items():
        source = package_of(module)
        for name in names:
            if package_of(name) != source:
                graph[source][package_of(name)].add(module)
    return graph


def test_every_package_has_a_rank() -> None:
    graph = import_graph()
    packages = set(graph) | {target for targets in graph.values() for target in targets}
    assert packages - set(RANKS) == set(), "place these packages in RANKS"


def test_no_import_points_up_the_table() -> None:
    back_edges = [
        f"{source} (rank {RANKS[source]}) imports {target} (rank {RANKS[target]}): {sorted(modules)}"
        for source, targets in import_graph().items()
        for target, modules in targets.items()
        if source in RANKS and target in RANKS and RANKS[target] > RANKS[source]
    ]
    assert back_edges == []


def test_no_cycle_between_packages() -> None:
    graph = {source: set(targets) for source, targets in import_graph().items()}

    def reaches(start: str, goal: str) -> bool:
        seen: set[str] = set()
        todo = [start]
        while todo:
            package = todo.pop()
            if package == goal:
                return True
            if package not in seen:
                seen.add(package)
                todo.extend(graph.get(package, ()))
        return False

    cycles = sorted(
        f"{source} -> {target} -> ... -> {source}"
        for source, targets in graph.items()
        for target in targets
        if reaches(target, source)
    )
    assert cycles == []


def test_the_graph_is_read() -> None:
    """The checks above see real imports (a broken walk would pass them vacuously)."""
    graph = import_graph()
    assert "pipeline" in graph["lumber"]
    assert "broker.log" in graph["broker.server"]
    assert "schemas" in graph["schemas.registry"]


# Inside the clients (issue 34): one folder per concern, from the connection up to the groups. A client module
# imports a folder of a lower rank or its own, never one of its own rank (the producer and the consumer know
# nothing of each other). The package's ``__init__`` (which imports nothing) is left out.
CLIENT_FOLDERS: dict[str, int] = {
    "broker.client": 0,  # errors, settings
    "broker.client.network": 1,
    "broker.client.metadata": 2,
    "broker.client.producer": 3,
    "broker.client.consumer": 3,
    "broker.client.groups": 4,  # with its two kinds, groups.zookeeper and groups.kafka
}


def client_folder_of(module: str) -> str:
    """The folder a client module is ranked by (a kind of group counts as the groups)."""
    parts = module.split(".")
    if len(parts) > 3 and (ROOT / "broker" / "client" / parts[2]).is_dir():
        return ".".join(parts[:3])
    return "broker.client"


def client_imports() -> list[tuple[str, str]]:
    """(importer, imported) for every import between two client modules, ``__init__`` left out."""
    return [
        (module, name)
        for module, names in module_imports().items()
        if module.startswith("broker.client.") and not module.endswith("__init__")
        for name in names
        if name.startswith("broker.client.")
    ]


def test_every_client_folder_has_a_rank() -> None:
    folders = {".".join(("broker", "client", path.name)) for path in (ROOT / "broker" / "client").iterdir()}
    folders = {folder for folder in folders if (ROOT / folder.replace(".", "/") / "__init__.py").exists()}
    assert folders | {"broker.client"} == set(CLIENT_FOLDERS), "place these client folders in CLIENT_FOLDERS"


def test_client_imports_point_down_the_folders() -> None:
    wrong = [
        f"{module} imports {name}"
        for module, name in client_imports()
        if client_folder_of(module) != client_folder_of(name)
        and CLIENT_FOLDERS[client_folder_of(name)] >= CLIENT_FOLDERS[client_folder_of(module)]
    ]
    assert wrong == []


def test_the_two_kinds_of_group_know_nothing_of_each_other() -> None:
    """The paper's groups and the group protocol sit side by side on the shared group code; only the API
    above both (``group_consumer``) imports both."""
    kinds = ("broker.client.groups.zookeeper", "broker.client.groups.kafka")
    wrong = [
        f"{module} imports {name}"
        for module, name in client_imports()
        for kind, other in (kinds, kinds[::-1])
        if module.startswith(kind + ".")
        and (name.startswith(other) or name == "broker.client.groups.group_consumer")
    ]
    assert wrong == []


def test_the_client_graph_is_read() -> None:
    pairs = set(client_imports())
    assert ("broker.client.metadata.broker_pool", "broker.client.network.connection") in pairs
    assert (
        "broker.client.groups.group_consumer",
        "broker.client.groups.kafka.kafka_group_membership",
    ) in pairs
