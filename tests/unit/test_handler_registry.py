"""The handler registry's table of served APIs agrees with the handlers, and a look-up imports only
the handler asked for."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import textwrap

import pytest

import kafkalite.broker.handlers
from kafkalite.broker.handlers.api_versions import api_versions_response
from kafkalite.broker.handlers.registry import (
    HANDLERS,
    NOT_SERVED,
    SERVED,
    ApiHandler,
    HandlerRegistry,
    ServedApi,
    handles,
)
from kafkalite.protocol.messages import REQUESTS


def test_every_handler_module_is_in_the_table_with_the_versions_it_registers() -> None:
    # every module of the package is one API's handler, but the registry and the delayed answers they share
    modules = {info.name for info in pkgutil.iter_modules(kafkalite.broker.handlers.__path__)} - {"registry", "delayed"}
    assert sorted(api.module for api in SERVED.values()) == sorted(modules)
    for api_key, served in SERVED.items():
        handler = HANDLERS[api_key]
        assert handler.handle.__module__ == f"kafkalite.broker.handlers.{served.module}"
        assert (handler.api_key, handler.min_version, handler.max_version) == \
            (api_key, served.min_version, served.max_version)
        low, high = REQUESTS[api_key].VALID_VERSIONS
        assert low <= served.min_version <= served.max_version <= high
    assert HANDLERS.loaded() == frozenset(SERVED)
    assert set(REQUESTS) == set(SERVED) | set(NOT_SERVED)


def test_api_versions_answers_from_the_table() -> None:
    answer = api_versions_response(HANDLERS)
    assert [(api.api_key, api.min_version, api.max_version) for api in answer.api_keys] == \
        [(key, api.min_version, api.max_version) for key, api in sorted(SERVED.items())]


def test_handles_refuses_versions_the_table_does_not_list() -> None:
    registry = HandlerRegistry({18: ServedApi("api_versions", 0, 4)}, package="nowhere")
    handler = HANDLERS[18]
    with pytest.raises(ValueError, match="SERVED lists"):
        registry.register(ApiHandler(18, "ApiVersions", 0, 3, handler.request_type, handler.response_type,
                                     handler.handle), "kafkalite.broker.handlers.api_versions")
    with pytest.raises(ValueError, match="registered twice"):
        handles(18, 0, 4)(handler.handle)  # the real registry already has it


def test_an_unserved_key_is_not_found_without_importing_anything() -> None:
    assert 38 not in HANDLERS
    assert HANDLERS.get(38) is None
    with pytest.raises(KeyError):
        HANDLERS[38]


def test_a_look_up_imports_only_its_handler() -> None:
    """In a fresh interpreter: ApiVersions' answer imports no handler module but its own, and asking
    for Metadata imports the Metadata handler and not, say, the group or transaction rooms."""
    script = textwrap.dedent("""
        import sys
        from kafkalite.broker.handlers.api_versions import api_versions_response
        from kafkalite.broker.handlers.registry import HANDLERS
        api_versions_response(HANDLERS)
        def handlers():
            return sorted(name.rpartition(".")[2] for name in sys.modules
                          if name.startswith("kafkalite.broker.handlers.") and not name.endswith(".registry"))
        print(handlers())
        HANDLERS[3]
        print(handlers())
        print(sorted(name for name in sys.modules if name.startswith(("kafkalite.broker.core.group",
                                                                     "kafkalite.broker.core.txn"))))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    first, second, rooms = result.stdout.splitlines()
    assert first == "['api_versions']"
    assert second == "['api_versions', 'metadata']"
    assert rooms == "[]"
