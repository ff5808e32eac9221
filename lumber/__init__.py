"""Lumber, the application: the ``lumber`` CLI, the dev stack, the demo, the web console and the composite
``lumber.toml`` config.

The top of the package order (issue 18): ``lumber`` imports every library package (``broker``, ``schemas``,
``audit``, ``mirror``, ``pipeline``) and none of them imports ``lumber``.
"""

__version__ = "0.1.0"
