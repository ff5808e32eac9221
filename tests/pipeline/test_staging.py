"""Staging's Spark settings, on the real local Spark session (the ``spark`` fixture)."""

from __future__ import annotations

from typing import Any

from pipeline.staging import CONCURRENT_WRITERS, CONCURRENT_WRITERS_KEY, side_by_side_writers


def test_side_by_side_writers_is_on_within_the_block_and_restored_after(spark: Any) -> None:
    spark.conf.unset(CONCURRENT_WRITERS_KEY)
    before = spark.conf.get(CONCURRENT_WRITERS_KEY)
    assert before == "0"
    with side_by_side_writers(spark):
        assert spark.conf.get(CONCURRENT_WRITERS_KEY) == str(CONCURRENT_WRITERS)
    assert spark.conf.get(CONCURRENT_WRITERS_KEY) == "0"


def test_a_setting_of_the_session_is_kept(spark: Any) -> None:
    spark.conf.set(CONCURRENT_WRITERS_KEY, "5")
    try:
        with side_by_side_writers(spark):
            assert spark.conf.get(CONCURRENT_WRITERS_KEY) == "5"
        assert spark.conf.get(CONCURRENT_WRITERS_KEY) == "5"
    finally:
        spark.conf.unset(CONCURRENT_WRITERS_KEY)
