"""``python -m pipeline`` is the ``lumber`` command."""

import sys

from pipeline.cli import main

sys.exit(main())
