"""The Grafana dashboard (lumber/console/grafana_dashboard.json) only queries metrics Lumber exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import broker.server.broker_metrics
import pipeline.lag_metrics
import pipeline.load_metrics
import schemas.registry.registry_metrics

ROOT = Path(__file__).resolve().parents[3]
#: the names a Prometheus client adds to a counter's or histogram's declared name
SUFFIXES = ("_total", "_bucket", "_count", "_sum")
MODULES = (
    broker.server.broker_metrics,
    pipeline.lag_metrics,
    pipeline.load_metrics,
    schemas.registry.registry_metrics,
)


def declared(name: str, sources: str) -> bool:
    if f'"{name}"' in sources:
        return True
    return any(name.endswith(s) and f'"{name.removesuffix(s)}"' in sources for s in SUFFIXES)


def test_every_queried_metric_is_exported() -> None:
    dashboard = json.loads((ROOT / "lumber/console/grafana_dashboard.json").read_text())
    sources = "".join(Path(m.__file__).read_text() for m in MODULES if m.__file__)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    names = {n for e in exprs for n in re.findall(r"\b((?:kafka|lumber|schema_registry)_[a-z_]+)\b", e)}
    assert len(exprs) == 29
    assert len(names) == 28
    assert sorted(n for n in names if not declared(n, sources)) == []
