"""DIFFERENCES.md and the normalisers of tests/conformance/conformance.py name the same differences, and every
listed scenario exists."""

from __future__ import annotations

import importlib
from pathlib import Path

from tests.conformance.conformance import NORMALISERS, listed_differences


def test_every_listed_difference_has_its_normaliser_and_scenarios() -> None:
    listed = listed_differences()
    assert set(listed) == set(NORMALISERS)
    scenarios = set()
    for module in Path(__file__).parent.glob("test_*.py"):
        loaded = importlib.import_module(f"tests.conformance.{module.stem}")
        scenarios |= {name for name, value in vars(loaded).items() if callable(value)}
    for difference, names in listed.items():
        assert names <= scenarios, f"{difference} names scenarios that do not exist: {names - scenarios}"
