"""``python -m kafkalite``: the same as the ``kafkalite`` command (``serve`` by default)."""

import sys

from kafkalite.cli import main

sys.exit(main())
