"""Secured test brokers: ``security="SASL_SSL"`` and ready-made client configs for each client.

    with EmbeddedBroker(security="SASL_SSL:SCRAM-SHA-256") as broker:
        producer = KafkaProducer(**broker.kafka_python_config("alice"))
        consumer = confluent_kafka.Consumer({**broker.confluent_config("bob"), "group.id": "g"})
        admin = kafkalite.client.sync.Admin(broker.client_config())   # the bundled client, as admin

``security`` is ``PROTOCOL[:MECHANISM]``: ``SSL`` (TLS, and a client certificate per user:
``ssl.client.auth=required``, the certificate ``CN=<user>`` maps to ``User:<user>``),
``SASL_PLAINTEXT`` or ``SASL_SSL`` with ``PLAIN`` (the default), ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
or ``OAUTHBEARER`` (unsecured tokens: librdkafka and kafka-python make them themselves). The broker's
one listener is of that protocol. Its users are ``admin``, ``alice`` and ``bob`` (password
``<user>-secret``; SCRAM credentials are stored before the first client connects); ``admin`` is in
``super.users``, so ACLs bind only when the test turns the authorizer on
(``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``). TLS uses a
development CA made for the broker (``kafkalite certs``; needs the ``security`` extra), in a
directory removed when the broker closes.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PASSWORDS", "TestSecurity"]

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
_PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(slots=True)
class TestSecurity:
    """What a ``security=...`` option makes: broker keys, certificates, client configs."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    protocol: str
    mechanism: str | None
    directory: Path | None = None
    certificates: Any = None  # kafkalite.cli.dev_certificates.DevCertificates
    keystores: dict[str, Path] = field(default_factory=dict)  # user -> PEM key + certificate
    owns_directory: bool = True  # a temporary directory, removed by close()

    @classmethod
    def parse(cls, text: str, directory: Path | None = None) -> TestSecurity:
        """``directory``: keep the certificates there (made once, found again later) instead of in a
        temporary directory that ``close`` removes."""
        protocol, _, mechanism = text.upper().partition(":")
        if protocol not in _PROTOCOLS:
            raise ValueError(f"security={text!r}: the protocol is one of {', '.join(_PROTOCOLS)}")
        if protocol.startswith("SASL_"):
            mechanism = mechanism or "PLAIN"
            if mechanism not in _MECHANISMS:
                raise ValueError(f"security={text!r}: the mechanism is one of {', '.join(_MECHANISMS)}")
        elif mechanism:
            raise ValueError(f"security={text!r}: SSL takes no SASL mechanism")
        security = cls(protocol, mechanism or None)
        if directory is not None:
            security.directory, security.owns_directory = directory, False
        if protocol.endswith("SSL"):
            security._make_certificates()
        return security

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @property
    def scram(self) -> bool:
        return bool(self.mechanism and self.mechanism.startswith("SCRAM-"))

    def _make_certificates(self) -> None:
        from kafkalite.cli.dev_certificates import DevCertificates, make_certificates

        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="kafkalite-certs-"))
        self.certificates = DevCertificates.existing(self.directory, list(PASSWORDS)) or make_certificates(
            self.directory, ("localhost", "127.0.0.1"), list(PASSWORDS))
        for user, (certificate, key) in self.certificates.clients.items():
            keystore = self.directory / f"{user}-keystore.pem"
            keystore.write_bytes(key.read_bytes() + certificate.read_bytes())
            keystore.chmod(0o600)
            self.keystores[user] = keystore

    def close(self) -> None:
        if self.directory is not None and self.owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    # the broker ------------------------------------------------------------------------------
    def broker_configs(self, host: str, port: int) -> dict[str, str]:
        name = self.protocol
        configs = {"listeners": f"{name}://{host}:{port}", "listener.security.protocol.map": f"{name}:{name}",
                   "super.users": "User:admin"}
        if self.tls:
            configs.update(self.certificates.broker_settings())
        if self.protocol == "SSL":
            configs["ssl.client.auth"] = "required"
            configs["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+),O=kafkalite$/$1/,DEFAULT"
        if self.mechanism is not None:
            configs["sasl.enabled.mechanisms"] = self.mechanism
            users = " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
            configs[f"listener.name.{name.lower()}.plain.sasl.jaas.config"] = f"{_PLAIN_MODULE} required {users};"
        return configs

    def store_scram_credentials(self, credentials: Any) -> None:
        """Give every user a credential for the mechanism (``cluster.scram_credentials``), and save them."""
        import os

        from kafkalite.broker.security.scram import derive_credential, salted_password

        assert self.mechanism is not None
        for user, password in PASSWORDS.items():
            salt = os.urandom(16)
            credentials.set(user, self.mechanism, derive_credential(
                self.mechanism, salted_password(self.mechanism, password, salt, 4096), salt, 4096))
        credentials.save()

    # the clients -----------------------------------------------------------------------------
    def client_config(self, bootstrap_servers: str, user: str = "admin") -> dict[str, Any]:
        """The bundled client's config (Kafka's key names)."""
        config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "security.protocol": self.protocol}
        if self.tls:
            config["ssl.truststore.location"] = str(self.certificates.ca)
            if self.protocol == "SSL":
                config["ssl.keystore.location"] = str(self.keystores[user])
        if self.mechanism is not None:
            config.update({"sasl.mechanism": self.mechanism, "sasl.username": user, "sasl.password": PASSWORDS[user]})
        return config

    def confluent_config(self, bootstrap_servers: str, user: str = "admin") -> dict[str, Any]:
        """confluent-kafka's (librdkafka's) config."""
        config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "security.protocol": self.protocol}
        if self.tls:
            config["ssl.ca.location"] = str(self.certificates.ca)
            if self.protocol == "SSL":
                certificate, key = self.certificates.clients[user]
                config.update({"ssl.certificate.location": str(certificate), "ssl.key.location": str(key)})
        if self.mechanism == "OAUTHBEARER":
            config.update({"sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                           "sasl.oauthbearer.config": f"principal={user}"})
        elif self.mechanism is not None:
            config.update({"sasl.mechanism": self.mechanism, "sasl.username": user, "sasl.password": PASSWORDS[user]})
        return config

    def kafka_python_config(self, bootstrap_servers: str, user: str = "admin") -> dict[str, Any]:
        """kafka-python's keyword arguments."""
        config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers, "security_protocol": self.protocol}
        if self.tls:
            config.update({"ssl_cafile": str(self.certificates.ca), "ssl_check_hostname": True})
            if self.protocol == "SSL":
                certificate, key = self.certificates.clients[user]
                config.update({"ssl_certfile": str(certificate), "ssl_keyfile": str(key)})
        if self.mechanism == "OAUTHBEARER":
            config.update({"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": _token_provider(user)})
        elif self.mechanism is not None:
            config.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": user,
                           "sasl_plain_password": PASSWORDS[user]})
        return config


def _token_provider(user: str) -> Any:
    """kafka-python's token provider (a subclass of its ``AbstractTokenProvider``, wherever this version
    of kafka-python keeps it) giving an unsecured JWS for ``user``."""
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider
    except ImportError:
        from kafka.sasl.oauth import AbstractTokenProvider

    class Provider(_UnsecuredToken, AbstractTokenProvider):  # type: ignore[misc]
        pass

    return Provider(user)


class _UnsecuredToken:
    """An unsecured JWS for ``user`` (``alg`` none), valid for an hour."""

    def __init__(self, user: str) -> None:
        self.user = user

    def token(self) -> str:
        import base64
        import json
        import time

        def part(value: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

        now = int(time.time())
        return f"{part({'alg': 'none'})}.{part({'sub': self.user, 'iat': now, 'exp': now + 3600})}."

    def extensions(self) -> dict[str, str]:
        return {}
