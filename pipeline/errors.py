"""The pipeline package's root exception and its direct families."""


class PipelineError(Exception):
    """Root of every error raised by :mod:`pipeline`."""


class ConfigError(PipelineError):
    """``lumber.toml`` or an environment override is invalid; the message names the key."""


class DevStackError(PipelineError):
    """The local development stack could not be started, inspected or stopped."""
