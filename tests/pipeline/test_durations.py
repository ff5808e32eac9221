from __future__ import annotations

import pytest

from pipeline.durations import DurationError, parse_duration_ms
from pipeline.errors import PipelineError


def test_durations_add_their_parts() -> None:
    texts = ("0", "250ms", "90s", "10m", "30m", "1h", "2h30m", "1d", " 1H ", "1h0m30s")
    assert [parse_duration_ms(t, "--every") for t in texts] == [
        0, 250, 90_000, 600_000, 1_800_000, 3_600_000, 9_000_000, 86_400_000, 3_600_000, 3_630_000,
    ]  # fmt: skip


@pytest.mark.parametrize("text", ["1 hour", "", "h", "10", "-1h", "1.5h", "1w"])
def test_anything_else_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(DurationError, match=f"--every {text!r}: expected a duration") as failure:
        parse_duration_ms(text, "--every")
    assert isinstance(failure.value, PipelineError)
