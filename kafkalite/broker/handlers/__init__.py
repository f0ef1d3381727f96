"""One thin module per API key, each imported when its API is first asked for.

Each module in this package registers its API with ``@handles`` from ``registry`` when it is
imported, and ``registry.SERVED`` names the module of each API key, so ``registry.HANDLERS`` can
import a handler on the first request of its API rather than all of them at start. Adding a handler
is adding a module and its line in ``SERVED`` (``handles`` refuses a module the table does not list).
"""
