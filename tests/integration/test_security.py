"""TLS, SASL and ACLs with real clients: kafka-python, confluent-kafka and the bundled client.

Each mechanism over TLS and plaintext, a wrong password refused, a principal without READ that cannot
consume until an ACL is added, a transactional producer without WRITE on its transactional id, ACLs
kept across a restart, Metadata hiding topics, and the authenticated port staying up for everyone
while bad frames arrive before authentication.
"""

from __future__ import annotations

import json
import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kafkalite.client.sync import Admin, Consumer, Producer
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.testing.embedded import EmbeddedBroker

pytest.importorskip("cryptography")
kafka = pytest.importorskip("kafka")

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
SECURITY = ["SSL", "SASL_PLAINTEXT:PLAIN", "SASL_SSL:PLAIN", "SASL_PLAINTEXT:SCRAM-SHA-256",
            "SASL_SSL:SCRAM-SHA-512", "SASL_PLAINTEXT:OAUTHBEARER"]
TIMEOUT_S = 20.0


@pytest.fixture(scope="module", params=SECURITY)
def secured(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(security=request.param) as broker:
        yield broker


def _topic() -> str:
    return f"secure-{uuid.uuid4().hex[:8]}"


def _confluent_round_trip(broker: EmbeddedBroker, topic: str, user: str = "alice") -> bytes:
    producer = confluent_kafka.Producer({**broker.confluent_config(user), "message.timeout.ms": 10_000})
    delivered: list[Any] = []
    producer.produce(topic, b"over confluent-kafka", on_delivery=lambda error, message: delivered.append(error))
    producer.flush(TIMEOUT_S)
    assert delivered == [None]
    consumer = confluent_kafka.Consumer({**broker.confluent_config(user), "group.id": f"g-{topic}",
                                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return bytes(message.value())
        raise AssertionError("confluent-kafka consumed nothing")
    finally:
        consumer.close()


def test_confluent_kafka_produces_and_consumes(secured: EmbeddedBroker) -> None:
    topic = _topic()
    secured.create_topic(topic)
    assert _confluent_round_trip(secured, topic) == b"over confluent-kafka"


def test_kafka_python_produces_and_consumes(secured: EmbeddedBroker) -> None:
    topic = _topic()
    secured.create_topic(topic)
    producer = kafka.KafkaProducer(**secured.kafka_python_config("alice"))
    producer.send(topic, b"over kafka-python").get(timeout=TIMEOUT_S)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, **secured.kafka_python_config("bob"), auto_offset_reset="earliest",
                                   consumer_timeout_ms=10_000)
    try:
        assert next(iter(consumer)).value == b"over kafka-python"
    finally:
        consumer.close()


def test_bundled_client_produces_and_consumes(secured: EmbeddedBroker) -> None:
    topic = _topic()
    secured.create_topic(topic)  # over the bundled admin client, as admin
    with Producer(secured.client_config("alice")) as producer:
        producer.send(topic, b"over the bundled client").result(TIMEOUT_S)
    with Consumer({**secured.client_config("bob"), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}) \
            as consumer:
        consumer.subscribe([topic])
        records: list[Any] = []
        for _ in range(40):
            records += consumer.poll(timeout_ms=500)
            if records:
                break
        assert [record.value for record in records] == [b"over the bundled client"]


# refusals ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("security", ["SASL_PLAINTEXT:PLAIN", "SASL_SSL:SCRAM-SHA-256"])
def test_a_wrong_password_is_refused_by_every_client(security: str) -> None:
    with EmbeddedBroker(security=security) as broker:
        config = broker.client_config("alice")
        with pytest.raises(KafkaError) as refused:
            Admin({**config, "sasl.password": "wrong"}).list_topics()
        assert refused.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "wrong" not in str(refused.value)

        errors: list[Any] = []
        producer = confluent_kafka.Producer({**broker.confluent_config("alice"), "sasl.password": "wrong",
                                             "error_cb": errors.append})
        for _ in range(40):
            producer.poll(0.25)
            if errors:
                break
        assert errors and errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION

        with pytest.raises(kafka.errors.KafkaError):
            kafka.KafkaProducer(**{**broker.kafka_python_config("alice"), "sasl_plain_password": "wrong"},
                                max_block_ms=5_000, request_timeout_ms=5_000)
        assert "authentication failed" in broker.log_text()
        assert _confluent_round_trip(broker, _topic()) == b"over confluent-kafka"  # the right one still works


def test_an_unknown_user_and_a_wrong_password_read_alike() -> None:
    with EmbeddedBroker(security="SASL_PLAINTEXT:PLAIN") as broker:
        messages = []
        for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
            with pytest.raises(KafkaError) as refused:
                Admin({**broker.client_config("alice"), "sasl.username": user, "sasl.password": password}
                      ).list_topics()
            messages.append(str(refused.value).replace(user, "USER"))
        assert messages[0] == messages[1]


# ACLs ----------------------------------------------------------------------------------------------
def _acl(resource_type: ResourceType, name: str, operation: AclOperation, principal: str = "User:alice",
         pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _create_acls(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(TIMEOUT_S)


def test_a_principal_without_read_cannot_consume_until_an_acl_allows_it(tmp_path: Path) -> None:
    with EmbeddedBroker(AUTHORIZER, security="SASL_PLAINTEXT:SCRAM-SHA-256") as broker:
        topic = _topic()
        broker.create_topic(topic)
        broker.produce(topic, [b"secret"])
        admin = AdminClient(broker.confluent_config("admin"))
        _create_acls(admin, _acl(ResourceType.GROUP, "readers", AclOperation.READ))
        consumer = confluent_kafka.Consumer({**broker.confluent_config("alice"), "group.id": "readers",
                                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            errors = []
            for _ in range(40):
                message = consumer.poll(0.25)
                if message is not None:
                    assert message.error() is not None, "alice read a topic she may not read"
                    errors.append(message.error().code())
                    break
            assert errors == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        finally:
            consumer.close()
        _create_acls(admin, _acl(ResourceType.TOPIC, topic, AclOperation.READ))
        consumer = confluent_kafka.Consumer({**broker.confluent_config("alice"), "group.id": "readers",
                                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            values = []
            for _ in range(40):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value())
                    break
            assert values == [b"secret"]
        finally:
            consumer.close()


def test_a_transactional_producer_without_write_on_its_transactional_id_is_refused() -> None:
    with EmbeddedBroker(AUTHORIZER, security="SASL_PLAINTEXT:PLAIN") as broker:
        topic = _topic()
        broker.create_topic(topic)
        admin = AdminClient(broker.confluent_config("admin"))
        _create_acls(admin, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
        producer = confluent_kafka.Producer({**broker.confluent_config("alice"), "transactional.id": "payments"})
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            producer.init_transactions(TIMEOUT_S)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        _create_acls(admin, _acl(ResourceType.TRANSACTIONAL_ID, "pay", AclOperation.WRITE,
                                 pattern=ResourcePatternType.PREFIXED))
        producer = confluent_kafka.Producer({**broker.confluent_config("alice"), "transactional.id": "payments"})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(topic, b"paid")
        producer.commit_transaction(TIMEOUT_S)


def test_metadata_hides_topics_and_acls_survive_a_restart(tmp_path: Path) -> None:
    with EmbeddedBroker(AUTHORIZER, data_dir=tmp_path / "data", security="SASL_PLAINTEXT:PLAIN") as broker:
        for name in ("public-a", "public-b", "private"):
            broker.create_topic(name)
        _create_acls(AdminClient(broker.confluent_config("admin")),
                     _acl(ResourceType.TOPIC, "public-", AclOperation.DESCRIBE, pattern=ResourcePatternType.PREFIXED))

        def visible() -> set[str]:
            admin = AdminClient(broker.confluent_config("alice"))
            return set(admin.list_topics(timeout=TIMEOUT_S).topics)

        assert visible() == {"public-a", "public-b"}
        consumer = kafka.KafkaConsumer(**broker.kafka_python_config("alice"))
        assert consumer.topics() == {"public-a", "public-b"}
        consumer.close()
        broker.restart()
        assert visible() == {"public-a", "public-b"}
        admin = AdminClient(broker.confluent_config("admin"))
        described = admin.describe_acls(
            confluent_kafka.admin.AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                   AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT_S)
        assert [(acl.name, acl.principal) for acl in described] == [("public-", "User:alice")]


def test_acl_apis_answer_security_disabled_without_an_authorizer() -> None:
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        [future] = admin.create_acls([_acl(ResourceType.TOPIC, "t", AclOperation.READ)]).values()
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            future.result(TIMEOUT_S)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.SECURITY_DISABLED


def test_scram_users_are_managed_over_the_admin_api() -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    with EmbeddedBroker(security="SASL_SSL:SCRAM-SHA-256") as broker:
        admin = AdminClient(broker.confluent_config("admin"))
        upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                              b"carol-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(TIMEOUT_S)
        described = admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT_S)
        assert [(info.mechanism, info.iterations) for info in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_256, 8192)]
        with Admin({**broker.client_config("alice"), "sasl.username": "carol", "sasl.password": "carol-secret"}) \
                as carol:
            assert isinstance(carol.list_topics(), dict)  # authenticated as carol


# hostile frames before authentication ----------------------------------------------------------------
def _frame(api_key: int, api_version: int, body: bytes, correlation_id: int = 1) -> bytes:
    client_id = b"fuzz"
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(header) + len(body)) + header + body


def _closed_by_broker(sock: socket.socket, deadline_s: float = 10.0) -> bool:
    sock.settimeout(deadline_s)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_bad_frames_before_authentication_leave_the_broker_serving_everyone_else() -> None:
    import random

    configs = {"sasl.server.authentication.timeout.ms": 2000}
    with EmbeddedBroker(configs, security="SASL_PLAINTEXT:SCRAM-SHA-512") as broker:
        host, port = broker.host, broker.port
        random_bytes = random.Random(14)
        attacks: list[Callable[[socket.socket], None]] = [
            lambda sock: sock.sendall(struct.pack(">i", 100 * 1024 * 1024)),  # oversized pre-auth frame
            lambda sock: sock.sendall(struct.pack(">i", 600 * 1024) + b"x" * 1024),  # over 512 KiB
            lambda sock: sock.sendall(_frame(3, 12, b"\x00" * 8)),  # Metadata before authenticating
            lambda sock: sock.sendall(_frame(36, 2, b"\x05hello\x00")),  # SaslAuthenticate before SaslHandshake
            lambda sock: sock.sendall(_frame(17, 1, b"\x00\x0dSCRAM-SHA-512")
                                      + _frame(36, 1, b"\x00\x00\x00\x03n,,", 2)),
            lambda sock: sock.sendall(b"\x00\x00\x00\x00"),  # empty frame
            lambda sock: None,  # says nothing: closed after sasl.server.authentication.timeout.ms
        ]
        for _ in range(20):  # fuzzed SASL frames: a valid handshake, then random tokens
            token = random_bytes.randbytes(random_bytes.randrange(0, 300))
            attacks.append(lambda sock, token=token: sock.sendall(
                _frame(17, 1, b"\x00\x0dSCRAM-SHA-512") + _frame(36, 1, struct.pack(">i", len(token)) + token, 2)))
        sockets = []
        for attack in attacks:
            sock = socket.create_connection((host, port), timeout=5)
            attack(sock)
            sockets.append(sock)
        assert _confluent_round_trip(broker, _topic()) == b"over confluent-kafka"  # while they are open
        for sock in sockets:
            assert _closed_by_broker(sock), "the broker kept a hostile unauthenticated connection open"
            sock.close()
        assert _confluent_round_trip(broker, _topic(), user="bob") == b"over confluent-kafka"


def test_a_subprocess_broker_with_security(tmp_path: Path) -> None:
    from kafkalite.testing.process import BrokerProcess

    with BrokerProcess(tmp_path / "data", security="SASL_SSL:SCRAM-SHA-256", admin=False) as broker:
        topic = _topic()
        broker.create_topic(topic)
        assert _confluent_round_trip(broker, topic) == b"over confluent-kafka"  # type: ignore[arg-type]


@pytest.mark.kafka_broker_config(security="SASL_PLAINTEXT:SCRAM-SHA-512", **AUTHORIZER)
def test_the_fixture_marker_gives_a_secured_broker_with_acls(kafka_broker: EmbeddedBroker) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic)  # the helpers connect as admin, a super user
    assert _confluent_round_trip(kafka_broker, topic, user="admin") == b"over confluent-kafka"
    producer = confluent_kafka.Producer({**kafka_broker.confluent_config("alice"), "message.timeout.ms": 5_000})
    delivered: list[Any] = []
    producer.produce(topic, b"no", on_delivery=lambda error, message: delivered.append(error))
    producer.flush(TIMEOUT_S)
    assert [error.code() for error in delivered] == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]


# the CLI ------------------------------------------------------------------------------------------
def _kafkalite(*arguments: str) -> tuple[int, str, str]:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    environment = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
    environment["PYTHONPATH"] = str(root)
    completed = subprocess.run([sys.executable, "-m", "kafkalite", *arguments], capture_output=True, text=True,
                               timeout=60, cwd=root, env=environment, check=False)
    return completed.returncode, completed.stdout, completed.stderr


def test_certs_make_a_tls_listener_that_clients_trust(tmp_path: Path) -> None:
    code, out, err = _kafkalite("certs", "--out", str(tmp_path / "certs"), "--client", "carol")
    assert code == 0, err
    assert "ssl.keystore.location=" in out
    certs = tmp_path / "certs"
    configs = {"listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL",
               "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker.pem"),
               "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
               "ssl.client.auth": "required"}
    with EmbeddedBroker(configs) as broker:
        keystore = tmp_path / "carol-keystore.pem"
        keystore.write_bytes((certs / "carol-key.pem").read_bytes() + (certs / "carol.pem").read_bytes())
        config = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
                  "ssl.truststore.location": str(certs / "ca.pem"), "ssl.keystore.location": str(keystore)}
        with Admin(config) as admin:
            assert isinstance(admin.list_topics(), dict)
        with pytest.raises(KafkaError):  # no client certificate: the handshake fails
            Admin({**config, "ssl.keystore.location": None, "request.timeout.ms": 3000,
                   "default.api.timeout.ms": 3000}).list_topics()


def test_scram_command_sets_describes_and_deletes_users() -> None:
    with EmbeddedBroker(security="SASL_PLAINTEXT:SCRAM-SHA-256") as broker:
        secured = broker.client_config("admin")
        flags = ["-b", broker.bootstrap_servers]
        for key in ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password"):
            flags += ["-X", f"{key}={secured[key]}"]
        code, out, err = _kafkalite("scram", "set", "dave", "--password", "dave-secret", "--iterations", "4096",
                                    *flags)
        assert code == 0, err
        code, out, err = _kafkalite("scram", "describe", "dave", "--json", *flags)
        assert code == 0, err
        assert json.loads(out) == [{"user": "dave", "mechanism": "SCRAM-SHA-256", "iterations": 4096}]
        with Admin({**secured, "sasl.username": "dave", "sasl.password": "dave-secret"}) as dave:
            assert isinstance(dave.list_topics(), dict)
        code, out, err = _kafkalite("scram", "delete", "dave", *flags)
        assert code == 0, err
        code, out, err = _kafkalite("scram", "describe", "dave", *flags)
        assert code == 1 and "RESOURCE_NOT_FOUND" in err or "does not exist" in err, err


def test_confluent_kafka_reauthenticates_before_its_session_runs_out() -> None:
    with EmbeddedBroker({"connections.max.reauth.ms": 1500}, security="SASL_PLAINTEXT:SCRAM-SHA-256") as broker:
        topic = _topic()
        broker.create_topic(topic)
        producer = confluent_kafka.Producer({**broker.confluent_config("alice"), "message.timeout.ms": 10_000})
        delivered: list[Any] = []
        for _ in range(200):  # one record every 50 ms until the broker saw a re-authentication
            producer.produce(topic, b"x", on_delivery=lambda error, message: delivered.append(error))
            producer.flush(TIMEOUT_S)
            producer.poll(0.05)
            if "re-authenticated as User:alice" in broker.log_text():
                break
        else:
            raise AssertionError("librdkafka did not re-authenticate")
        producer.produce(topic, b"after", on_delivery=lambda error, message: delivered.append(error))
        producer.flush(TIMEOUT_S)
        assert set(delivered) == {None}  # nothing failed across the re-authentication
        assert "session expired" not in broker.log_text()
