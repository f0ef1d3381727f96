"""One thin module per API key; importing this package registers every handler.

Each module in this package registers its API with ``@handles`` from ``registry`` when it is
imported. The loop below imports them all (sorted by name, ``registry`` itself skipped), so adding a
handler is adding a module: there is no list to keep in sync.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")
