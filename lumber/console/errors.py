"""The console's errors: each carries the HTTP status of the page that explains it.

:class:`ConsoleError` is the root (a :class:`~pipeline.errors.PipelineError`). What the user asked for that
does not exist (a topic, a partition, a group, a subject) is :class:`NotFoundError` (404); a parameter that
cannot be honoured (an offset outside the log, a malformed time, a record that is not Avro asked for as
Avro) is :class:`BadRequestError` (400); an action the user's role may not take is :class:`ForbiddenError`
(403); ZooKeeper, a broker or the registry not answering is
:class:`SourceUnavailableError` (503). The application renders each as a page (or JSON) naming what was
wrong: a user's input never produces a 500.
"""

from __future__ import annotations

from pipeline.errors import PipelineError


class ConsoleError(PipelineError):
    """Root of the console's errors; ``status`` is the HTTP status of the page that shows it."""

    status = 500
    title = "Console error"


class NotFoundError(ConsoleError):
    """The topic, partition, group, subject, version or schema id does not exist."""

    status = 404
    title = "Not found"


class BadRequestError(ConsoleError):
    """A parameter that cannot be honoured (named in the message, with what was expected)."""

    status = 400
    title = "Bad request"


class SourceUnavailableError(ConsoleError):
    """ZooKeeper, the brokers or the registry did not answer."""

    status = 503
    title = "Unavailable"


class ForbiddenError(ConsoleError):
    """An action the user's role may not take (a read-only user resetting offsets)."""

    status = 403
    title = "Forbidden"
