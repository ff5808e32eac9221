"""The ETL library's settings drawn from the app's composite config.

:mod:`pipeline` takes its own sections, never :class:`~lumber.config.LumberConfig` (issue 18: the library
does not import the app). A load run reads its sections through :class:`pipeline.load_sections.LoadSections`,
which the composite config satisfies as it is; a submitted run (``lumber etl run``, the scheduler) needs
the folder it works in and the effective config as text, which :func:`submit_settings` builds here.
"""

from __future__ import annotations

from pathlib import Path

from lumber.config import LumberConfig, dump_config
from pipeline.load_submit import SubmitSettings


def submit_settings(config: LumberConfig) -> SubmitSettings:
    """``[load]``, ``<[dev] state_dir>/etl`` and the whole effective config, for ``spark-submit``."""
    return SubmitSettings(
        load=config.load,
        etl_dir=Path(config.dev.state_dir) / "etl",
        config_text=f"# effective config of `lumber etl run` (from {config.source})\n" + dump_config(config),
    )
