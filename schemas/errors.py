"""The schemas package's root exception."""


class SchemaError(Exception):
    """Root of every error raised by :mod:`schemas`."""
