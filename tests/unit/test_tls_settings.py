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

pytest.importorskip("cryptography")


@pytest.fixture(scope="module")
def keystore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from kafkalite.cli.certs import make_certificates

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

