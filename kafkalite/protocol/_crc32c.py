"""CRC-32C (Castagnoli), from the ``crc32c`` package's hardware-accelerated extension.

The package's ``__init__`` asks ``importlib.metadata`` for its own version, which costs the
broker ~25 ms of start-up (it pulls in ``email`` and more). The function itself lives in the
extension module ``crc32c._crc32c``; this loads that module directly when it can, and falls back
to the ordinary import otherwise. It finds and loads it with ``importlib.machinery`` alone (the path
finder, a spec and the extension loader's ``create_module``/``exec_module``), which the interpreter
has loaded anyway, rather than ``importlib.util``, which a start would import for this alone.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["crc32c"]


def _load() -> Callable[..., int]:
    try:
        package = importlib.machinery.PathFinder.find_spec("crc32c")  # locates the package without running it
        locations = list(package.submodule_search_locations or []) if package else []
        for directory in locations:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = Path(directory) / f"_crc32c{suffix}"
                if path.exists():
                    name = "crc32c._crc32c"
                    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
                    spec = importlib.machinery.ModuleSpec(name, loader, origin=str(path))
                    module: Any = loader.create_module(spec)
                    # what an import would have set (importlib.util.module_from_spec)
                    module.__spec__, module.__loader__, module.__file__ = spec, loader, str(path)
                    module.__package__ = "crc32c"
                    loader.exec_module(module)
                    sys.modules.setdefault(name, module)
                    function: Callable[..., int] = module.crc32c
                    return function
    except (ImportError, OSError, AttributeError):
        pass
    from crc32c import crc32c as imported

    return imported


crc32c = _load()
