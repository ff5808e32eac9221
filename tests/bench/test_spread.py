"""bench/spread.py: the median [min - max] of alternated rounds and ratios of medians."""

from __future__ import annotations

import pytest

from bench.spread import Spread, ratio, ratio_text


def test_median_min_max_of_odd_and_even_counts() -> None:
    three = Spread([300.0, 100.0, 200.0])
    assert (three.median, three.low, three.high) == (200.0, 100.0, 300.0)
    assert three.text() == "200 [100 - 300]"
    four = Spread([1_000.0, 4_000.0, 2_000.0, 3_000.0])
    assert four.median == 2_500.0
    assert four.text() == "2,500 [1,000 - 4,000]"


def test_one_value_and_none() -> None:
    assert Spread([1234.5]).text(1) == "1,234.5"
    assert Spread().text() == "-"
    assert not Spread()
    with pytest.raises(ValueError, match="never ran"):
        _ = Spread().median


def test_values_added_one_round_at_a_time() -> None:
    spread = Spread()
    for value in (5.0, 1.0, 3.0):
        spread.add(value)
    assert spread.values == [5.0, 1.0, 3.0]
    assert spread.text(2) == "3.00 [1.00 - 5.00]"


def test_ratio_of_medians() -> None:
    lumber, kafka = Spread([90.0, 110.0, 100.0]), Spread([200.0, 50.0, 400.0])
    assert ratio(lumber, kafka) == pytest.approx(0.5)
    assert ratio_text(ratio(lumber, kafka)) == "0.50x"
    assert ratio(lumber, Spread()) is None
    assert ratio(Spread(), kafka) is None
    assert ratio(lumber, Spread([0.0])) is None
    assert ratio_text(None) == "-"
