"""TLS versions and cipher suites on a SASL_SSL listener, with clients that offer only what the broker
refuses: Python's ssl module (the handshake alone) and confluent-kafka (librdkafka's OpenSSL)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from kafkalite.testing.embedded import EmbeddedBroker

pytest.importorskip("cryptography")

SUITE, SUITE_OPENSSL = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"
OTHER_OPENSSL = "ECDHE-ECDSA-AES128-GCM-SHA256"


def _handshake(broker: EmbeddedBroker, *, maximum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
               minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2, ciphers: str | None = None) -> str | None:
    """The negotiated version, or None when the broker refused the handshake."""
    assert broker.security is not None and broker.security.certificates is not None
    context = ssl.create_default_context(cafile=str(broker.security.certificates.ca))
    context.minimum_version, context.maximum_version = minimum, maximum
    if ciphers is not None:
        context.set_ciphers(ciphers)
    with socket.create_connection((broker.host, broker.port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as secured:
                return secured.version()
        except (ssl.SSLError, ConnectionResetError):
            return None


@pytest.fixture(scope="module")
def tls13_only() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"listener.name.sasl_ssl.ssl.enabled.protocols": "TLSv1.3"},
                        security="SASL_SSL:PLAIN") as broker:
        yield broker


@pytest.fixture(scope="module")
def one_suite() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"ssl.cipher.suites": SUITE}, security="SASL_SSL:PLAIN") as broker:
        yield broker


def test_a_client_offering_only_a_refused_protocol_is_refused(tls13_only: EmbeddedBroker) -> None:
    assert _handshake(tls13_only, maximum=ssl.TLSVersion.TLSv1_2) is None
    assert _handshake(tls13_only) == "TLSv1.3"
    admin = AdminClient(tls13_only.confluent_config("alice"))  # librdkafka offers TLS 1.3: served
    assert admin.list_topics(timeout=20).brokers


def test_a_client_offering_only_a_refused_cipher_suite_is_refused(one_suite: EmbeddedBroker) -> None:
    assert _handshake(one_suite, maximum=ssl.TLSVersion.TLSv1_2, ciphers=OTHER_OPENSSL) is None
    assert _handshake(one_suite, minimum=ssl.TLSVersion.TLSv1_3) is None  # no TLS 1.3 suite listed: no TLS 1.3
    assert _handshake(one_suite, ciphers=SUITE_OPENSSL) == "TLSv1.2"
    refused = AdminClient({**one_suite.confluent_config("alice"), "ssl.cipher.suites": OTHER_OPENSSL})
    with pytest.raises(confluent_kafka.KafkaException):
        refused.list_topics(timeout=3)
    served = AdminClient({**one_suite.confluent_config("alice"), "ssl.cipher.suites": SUITE_OPENSSL})
    assert served.list_topics(timeout=20).brokers


def test_a_value_openssl_refuses_fails_the_start_naming_the_key() -> None:
    from kafkalite.broker.config import ConfigError

    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites"), \
            EmbeddedBroker({"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, security="SASL_SSL:PLAIN"):
        pass
