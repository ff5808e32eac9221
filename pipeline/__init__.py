"""Lumber's ETL framework: hourly Spark loads, atomic commits, audit, config, the ``lumber`` CLI."""

__version__ = "0.1.0"
