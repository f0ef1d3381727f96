"""The ``kafkalite`` command (``python -m kafkalite`` is the same).

``serve`` runs the broker; the other commands are a thin layer on the bundled client, named and
shaped after the tools Kafka users know (kafka-topics, kafka-console-producer,
kafka-consumer-groups, kcat), and work against any Kafka cluster:

======================  ===================================================================
``serve``               the broker (:mod:`.serve`, argparse; the default command)
``check`` / ``ping``    an ApiVersions and Metadata round trip: exit 0 when the cluster answers
``topics``              list, create, describe, alter, delete (:mod:`.topics`)
``produce``             records from stdin or a file, one per line (:mod:`.produce`)
``groups``              list, describe with lag, reset-offsets, delete (:mod:`.groups`)
``faults``              list, inject, clear faults through a broker's admin endpoint (:mod:`.faults`)
``certs``               a development CA, broker and client certificates for TLS (:mod:`.certs`)
``scram``               set, describe, delete users' SCRAM credentials (:mod:`.scram`)
======================  ===================================================================

:func:`main` looks at the first argument only: ``serve``, nothing, an option or a ``key=value`` pair
runs the broker without importing anything else; a command name (or ``--help``) goes to the click
application in :mod:`.app`, which imports click and the client only then.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

__all__ = ["main"]

_TOP_LEVEL_OPTIONS = ("-h", "--help", "--version")


def runs_the_broker(arguments: Sequence[str]) -> bool:
    """Whether ``kafkalite ARGUMENTS`` means ``serve`` (given or implied)."""
    if not arguments:
        return True
    first = arguments[0]
    if first == "serve":
        return True
    if first in _TOP_LEVEL_OPTIONS:
        return False
    return first.startswith("-") or "=" in first


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if runs_the_broker(arguments):
        # Importing and opening the broker allocates objects that live as long as the process; the
        # cyclic collector's passes over them find nothing to free. The broker's run() freezes what
        # start-up made and turns the collector back on once it listens.
        gc.disable()
        try:
            from kafkalite.cli.serve import main as serve

            return serve(arguments)
        finally:
            gc.enable()
    from kafkalite.cli.app import run

    return run(arguments)
