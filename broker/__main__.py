"""``python -m broker``: the same as the ``kafkalite`` command (``serve`` by default)."""

import sys

from broker.cli import main

sys.exit(main())
