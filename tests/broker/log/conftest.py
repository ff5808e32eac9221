"""The log tests' cleaners shut down after each test (see :mod:`tests.broker.log.compacted_logs`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.log.compacted_logs import shut_down_cleaners


@pytest.fixture(autouse=True)
def _shut_down_cleaners() -> Iterator[None]:
    yield
    shut_down_cleaners()
