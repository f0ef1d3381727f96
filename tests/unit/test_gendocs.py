"""The generated files (compatibility table, server.properties, the key reference) come from the
registries and must be current."""

from pathlib import Path

from kafkalite.broker import gendocs
from kafkalite.broker.config import CONFIG_KEYS, BrokerConfig, read_properties


def test_compatibility_doc_is_current() -> None:
    assert gendocs.COMPATIBILITY.read_text(encoding="utf-8") == gendocs.render_compatibility(), \
        "run `python -m kafkalite.broker.gendocs`"


def test_server_properties_is_current() -> None:
    assert gendocs.PROPERTIES.read_text(encoding="utf-8") == gendocs.render_properties(), \
        "run `python -m kafkalite.broker.gendocs`"


def test_every_advertised_api_has_a_documented_handler() -> None:
    from kafkalite.broker.handlers.registry import HANDLERS

    for handler in HANDLERS.values():
        module = __import__(handler.handle.__module__, fromlist=["_"])
        assert module.__doc__ and module.__doc__.strip(), handler.name


def test_configuration_reference_is_current() -> None:
    assert gendocs.CONFIGURATION.read_text(encoding="utf-8") == gendocs.render_configuration(), \
        "run `python -m kafkalite.broker.gendocs`"


def test_the_reference_lists_every_key_and_the_properties_file_those_with_an_effect(tmp_path: Path) -> None:
    reference = gendocs.render_configuration()
    text = gendocs.render_properties()
    for key in CONFIG_KEYS:
        assert f"| `{key.name}` |" in reference, key.name
        if key.inert is None:
            assert key.name in text, key.name
    assert "ssl.keymanager.algorithm" not in text and "controller.quorum.voters" not in text
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    assert set(read_properties(path)) == {key.name for key in CONFIG_KEYS if key.shipped}


def test_a_development_broker_starts_its_first_rebalance_at_once() -> None:
    path = gendocs.PROPERTIES
    assert BrokerConfig.load(path, {}, environ={}).get_int("group.initial.rebalance.delay.ms") == 0
    assert BrokerConfig().get_int("group.initial.rebalance.delay.ms") == 0
