"""The TLS versions and cipher suites of a listener's SSL context, from Kafka's keys, and the values
that fail the start (each naming its key)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig, ConfigError
from kafkalite.broker.security.settings import ListenerSettings
from kafkalite.broker.security.tls import server_ssl_context
from kafkalite.protocol.errors import ErrorCode

pytest.importorskip("cryptography")


@pytest.fixture(scope="module")
def keystore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from kafkalite.cli.dev_certificates import make_certificates

    certificates = make_certificates(tmp_path_factory.mktemp("certs"), ("localhost",), [])
    yield certificates.broker_settings()


def _context(keystore: dict[str, str], **keys: Any) -> ssl.SSLContext:
    configs = {"listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL", **keystore,
               **{key.replace("_", "."): value for key, value in keys.items()}}
    return server_ssl_context(ListenerSettings(BrokerConfig(configs), "SSL"))


def _names(context: ssl.SSLContext) -> set[str]:
    return {cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] != "TLSv1.3"}


def test_defaults_accept_tls_1_2_and_1_3(keystore: dict[str, str]) -> None:
    context = _context(keystore)
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


def test_enabled_protocols_and_the_protocol_cap(keystore: dict[str, str]) -> None:
    only_13 = _context(keystore, **{"ssl.enabled.protocols": "TLSv1.3"})
    assert (only_13.minimum_version, only_13.maximum_version) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    capped = _context(keystore, **{"ssl.protocol": "TLSv1.2"})
    assert capped.maximum_version == ssl.TLSVersion.TLSv1_2
    assert _context(keystore, **{"ssl.protocol": "TLS"}).maximum_version == ssl.TLSVersion.TLSv1_3
    per_listener = _context(keystore, **{"listener.name.ssl.ssl.protocol": "TLSv1.2"})
    assert per_listener.maximum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize(("keys", "named"), [
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
    ({"ssl.enabled.protocols": "TLSv1.2,TLSv9"}, "ssl.enabled.protocols"),
    ({"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2"}, "ssl.protocol"),
    ({"ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ssl.enabled.protocols": "TLSv1.3"},
     "ssl.cipher.suites"),
])
def test_values_the_local_openssl_refuses_fail_naming_the_key(keystore: dict[str, str], keys: dict[str, str],
                                                              named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        _context(keystore, **keys)


def test_cipher_suites_by_kafka_or_openssl_name(keystore: dict[str, str]) -> None:
    context = _context(keystore, **{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,"
                                                         "ECDHE-ECDSA-CHACHA20-POLY1305"})
    assert _names(context) == {"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"}
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite named: as Java, no TLS 1.3
    with_13 = _context(keystore, **{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,"
                                                         "TLS_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256,"
                                                         "TLS_CHACHA20_POLY1305_SHA256"})
    assert with_13.maximum_version == ssl.TLSVersion.TLSv1_3
    only_13 = _context(keystore, **{"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"})
    assert only_13.minimum_version == ssl.TLSVersion.TLSv1_3


def test_the_table_names_what_openssl_calls_them() -> None:
    from kafkalite.broker.security.cipher_suites import OPENSSL_NAMES

    known = {cipher["name"] for cipher in _all_ciphers()}
    assert set(OPENSSL_NAMES.values()) <= known


def _all_ciphers() -> list[dict[str, Any]]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers("ALL:@SECLEVEL=0")
    return context.get_ciphers()



def test_a_key_store_change_is_checked_before_it_is_stored_and_applied_after(
        keystore: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> None:
    from kafkalite.broker.core.dynamic_configs import DynamicConfigs
    from kafkalite.broker.security.connection import ListenerSecurity
    from kafkalite.broker.security.setup import BrokerSecurity, KeyStoreReloader
    from kafkalite.cli.dev_certificates import make_certificates

    config = BrokerConfig({"listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL", **keystore})
    security = BrokerSecurity({"SSL": ListenerSecurity("SSL", "SSL", server_ssl_context(ListenerSettings(config,
                                                                                                          "SSL")))})
    installed: list[tuple[str, ssl.SSLContext]] = []
    dynamic = DynamicConfigs(config, 1, None, lambda: None)
    dynamic.reconfigurables.append(KeyStoreReloader(config, security, lambda name, context: installed.append(
        (name, context))))
    key = "listener.name.ssl.ssl.keystore.location"
    broken = tmp_path_factory.mktemp("broken") / "broken.pem"
    broken.write_text("not a key store\n")
    with pytest.raises(ConfigError) as refused:
        dynamic.alter_broker({key: str(broken)}, cluster_default=False, validate_only=False)
    assert refused.value.error_code == ErrorCode.INVALID_CONFIG
    assert key not in config.dynamic_configs(False) and not installed  # undone, nothing installed
    renewed = make_certificates(tmp_path_factory.mktemp("renewed"), ("localhost",), [])
    dynamic.alter_broker({key: str(renewed.broker)}, cluster_default=False, validate_only=True)
    assert key not in config.dynamic_configs(False) and not installed  # validated only
    dynamic.alter_broker({key: str(renewed.broker)}, cluster_default=False, validate_only=False)
    assert [name for name, _ in installed] == ["SSL"]
    assert security.listeners["SSL"].ssl_context is installed[0][1]
    dynamic.alter_broker({"background.threads": "4"}, cluster_default=False, validate_only=False)
    assert len(installed) == 1  # nothing of TLS changed: nothing rebuilt
