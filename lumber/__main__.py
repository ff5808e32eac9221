"""``python -m lumber`` is the ``lumber`` command."""

import sys

from lumber.cli import main

sys.exit(main())
