"""The load job's fixtures (see :mod:`tests.support.load_job`)."""

from tests.support.load_job import load_registry

__all__ = ["load_registry"]
