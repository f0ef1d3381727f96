"""TLS on a SASL_SSL listener: versions and cipher suites, with clients that offer only what the broker
refuses (Python's ssl module for the handshake alone, and confluent-kafka), and a key store changed
at run time through AlterConfigs."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kafkalite.testing.embedded import EmbeddedBroker

pytest.importorskip("cryptography")

SUITE, SUITE_OPENSSL = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"
OTHER_OPENSSL = "ECDHE-ECDSA-AES128-GCM-SHA256"


def _handshake(broker: EmbeddedBroker, *, maximum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
               minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2, ciphers: str | None = None,
               ca: Path | None = None) -> str | None:
    """The negotiated version, or None when the handshake failed (refused, or a certificate not trusted)."""
    assert broker.security is not None and broker.security.certificates is not None
    context = ssl.create_default_context(cafile=str(ca or broker.security.certificates.ca))
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


def _set_broker_config(broker: EmbeddedBroker, key: str, value: str, ca: Path | None = None) -> Any:
    admin = AdminClient({**broker.confluent_config("admin"), **({"ssl.ca.location": str(ca)} if ca else {})})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    return admin.incremental_alter_configs([resource])[resource].result(20)


def test_a_new_key_store_through_alter_configs_serves_new_connections(tmp_path: Path) -> None:
    from kafkalite.cli.dev_certificates import make_certificates

    renewed = make_certificates(tmp_path / "renewed", ("localhost", "127.0.0.1"), [])
    with EmbeddedBroker(security="SASL_SSL:PLAIN") as broker:
        topic = "renewed-certificate"
        broker.create_topic(topic)
        connected = confluent_kafka.Producer(broker.confluent_config("alice"))
        delivered: list[Any] = []
        connected.produce(topic, b"before", on_delivery=lambda error, message: delivered.append(error))
        connected.flush(20)
        _set_broker_config(broker, "listener.name.sasl_ssl.ssl.keystore.location", str(renewed.broker))
        assert _handshake(broker) is None  # the old CA no longer vouches for what new connections see
        assert _handshake(broker, ca=renewed.ca) == "TLSv1.3"
        trusting_new = AdminClient({**broker.confluent_config("alice"), "ssl.ca.location": str(renewed.ca)})
        assert trusting_new.list_topics(timeout=20).brokers
        connected.produce(topic, b"after", on_delivery=lambda error, message: delivered.append(error))
        connected.flush(20)
        assert delivered == [None, None]  # the connection made before keeps its session
        broken = tmp_path / "broken.pem"
        broken.write_text("not a key store\n")
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            _set_broker_config(broker, "listener.name.sasl_ssl.ssl.keystore.location", str(broken), renewed.ca)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
        assert _handshake(broker, ca=renewed.ca) == "TLSv1.3"  # the stores before the refused change stay
