"""The broker package's root exception."""


class BrokerError(Exception):
    """Root of every error raised by :mod:`broker`."""
