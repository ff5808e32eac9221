"""Thin ``spark-submit`` entry points: parse arguments, build config, call :mod:`pipeline`."""
