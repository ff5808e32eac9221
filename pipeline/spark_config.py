"""How ``lumber etl run`` deploys the load on Spark: the ``[spark]`` section of ``lumber.toml``.

These keys were ``[load] spark_master``, ``spark_submit``, ``spark_conf`` and ``python`` (still read, with a
warning naming the new key); ``[load]`` keeps the data settings. The command built from them is described
in :mod:`pipeline.spark_submit`.
"""

from __future__ import annotations

from typing import Self

from pydantic import model_validator

from broker.config_section import ConfigSection, setting


class SparkConfig(ConfigSection):
    """Where and how the Spark load runs: master, spark-submit, extra settings and the workers' Python."""

    master: str = setting(
        "local[*]", "Spark master for `lumber etl run` (local[N], spark://host:port, yarn)."
    )
    submit: str = setting(
        "", "The spark-submit to run. Empty: the one installed with pyspark next to this Python."
    )
    conf: list[str] = setting(
        [], "Extra Spark settings for `lumber etl run`, as 'key=value' (passed as spark-submit --conf)."
    )
    python: str = setting(
        "",
        "Python that runs the driver and the executors' workers (must have Lumber's dependencies at the "
        "same path on every node). Empty: the Python running `lumber`.",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        for entry in self.conf:
            key, sep, _ = entry.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"spark.conf: expected 'key=value', got {entry!r}")
        return self
