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
    "broker.protocol": 2,
    "broker.network": 3,
    "broker.cluster": 3,
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


def import_graph() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the modules that import it."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for top in TOP_LEVEL:
        for path in sorted((ROOT / top).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            source = package_of(module)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    if name.split(".")[0] in TOP_LEVEL and package_of(name) != source:
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
