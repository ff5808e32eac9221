"""Lumber's ETL library: hourly Spark loads, atomic commits, the scheduler, the audit reconciliation.

It imports the broker's clients and the schema registry's client, never the app (:mod:`lumber`) nor the
``spark-submit`` entry points (:mod:`jobs`), which import it.
"""
