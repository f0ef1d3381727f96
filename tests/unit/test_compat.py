"""The compatibility table is generated from the handler registry and must be current."""

from kafkalite.broker import compat


def test_compatibility_doc_is_current() -> None:
    assert compat.DOC.read_text(encoding="utf-8") == compat.render(), "run `python -m kafkalite.broker.compat`"


def test_every_advertised_api_has_a_documented_handler() -> None:
    from kafkalite.broker.handlers.registry import HANDLERS

    for handler in HANDLERS.values():
        module = __import__(handler.handle.__module__, fromlist=["_"])
        assert module.__doc__ and module.__doc__.strip(), handler.name
