"""The Avro schemas shipped with Lumber (``schemas/avro/*.avsc``, installed as package data).

=================  =================================  ======================================================
name               full name                          what
=================  =================================  ======================================================
``page_view``      ``lumber.tracking.PageView``       a page view (version 1)
``page_view_v2``   ``lumber.tracking.PageView``       version 2: adds ``load_time_ms`` (null by default)
``click``          ``lumber.tracking.Click``          a click
``search``         ``lumber.tracking.Search``         a search
``audit_event``    ``lumber.audit.AuditEvent``        the audit's monitoring event (count per topic, tier,
                                                      host and window)
=================  =================================  ======================================================

Every tracking event carries ``timestamp_ms`` (creation time) and ``host`` (the producing host).
"""

from __future__ import annotations

from importlib import resources

from schemas.avro_schema import AvroSchema
from schemas.errors import SchemaError

SHIPPED = ("page_view", "page_view_v2", "click", "search", "audit_event")


def shipped_schema_text(name: str) -> str:
    """The ``.avsc`` text of a shipped schema, as written."""
    if name not in SHIPPED:
        raise SchemaError(f"no shipped schema {name!r}; the shipped ones are {', '.join(SHIPPED)}")
    return resources.files("schemas").joinpath("avro", f"{name}.avsc").read_text(encoding="utf-8")


def shipped_schema(name: str) -> AvroSchema:
    """A shipped schema, parsed and normalized."""
    return AvroSchema.parse(shipped_schema_text(name))
