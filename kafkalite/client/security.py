"""TLS and SASL for the bundled client: what ``security.protocol`` asks of each broker connection.

``ClientSecurity.from_config`` reads Kafka's client keys once per client:

* TLS (``SSL``, ``SASL_SSL``): ``ssl.truststore.location`` (a PEM file of CA certificates) or
  ``ssl.truststore.certificates`` (PEM text), else the system's CAs; ``ssl.keystore.location`` (a PEM
  file with the client's key and certificate chain, ``ssl.key.password``) for brokers that ask for a
  client certificate; ``ssl.endpoint.identification.algorithm`` ``https`` (the default) checks the
  broker's host name, empty does not.
* SASL (``SASL_PLAINTEXT``, ``SASL_SSL``): ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512,
  with the user and password of ``sasl.jaas.config`` (``... required username="u" password="p";``) or,
  as librdkafka names them, ``sasl.username`` and ``sasl.password``; OAUTHBEARER with an unsecured
  token (for local testing, as the Java client's default login module makes one) whose subject is
  ``unsecuredLoginStringClaim_sub`` of ``sasl.jaas.config``, or ``sasl.username``.

``authenticate`` runs the exchange over a connection's request function: SaslHandshake v1, then
SaslAuthenticate with PLAIN's one token or SCRAM's two (RFC 5802; the server's signature is checked,
so a broker that does not know the password cannot pass as the real one).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafkalite.client.config import ConfigError
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest

__all__ = ["ClientSecurity", "MECHANISMS"]

MECHANISMS = {"PLAIN": None, "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512", "OAUTHBEARER": None}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:\\.|[^"\\])*)"')
Request = Callable[[Message, int], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_config(cls, config: Any) -> ClientSecurity | None:
        """None for PLAINTEXT; ``ConfigError`` when the keys do not make a setup."""
        protocol = str(config.security_protocol).upper()
        if protocol == "PLAINTEXT":
            return None
        context = None
        check_hostname = (config.ssl_endpoint_identification_algorithm or "").lower() == "https"
        if protocol in ("SSL", "SASL_SSL"):
            try:
                context = ssl.create_default_context(cafile=config.ssl_truststore_location or None,
                                                     cadata=config.ssl_truststore_certificates or None)
                context.check_hostname = check_hostname
                if config.ssl_keystore_location:
                    context.load_cert_chain(config.ssl_keystore_location, password=config.ssl_key_password or None)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"cannot load the TLS trust or key store: {exc}") from None
        if not protocol.startswith("SASL_"):
            return cls(protocol, context, check_hostname)
        mechanism = str(config.sasl_mechanism).upper()
        if mechanism not in MECHANISMS:
            raise ConfigError(f"sasl.mechanism {mechanism} is not served by this client (PLAIN, SCRAM-SHA-256, "
                             "SCRAM-SHA-512, OAUTHBEARER)")
        options = {name: re.sub(r"\\(.)", r"\1", value)
                   for name, value in _JAAS_OPTION.findall(config.sasl_jaas_config or "")}
        username = (config.sasl_username or options.get("username", "")
                    or options.get("unsecuredLoginStringClaim_sub", ""))
        password = config.sasl_password or options.get("password", "")
        if not username:
            raise ConfigError(f"{protocol} needs a user: sasl.jaas.config with username=\"...\" password=\"...\", "
                             "or sasl.username and sasl.password")
        return cls(protocol, context, check_hostname, mechanism, username, password)

    async def authenticate(self, request: Request, handshake_version: int, authenticate_version: int,
                           address: str) -> int:
        """Run the SASL exchange; the session lifetime the broker gave (ms, 0: none). Raises KafkaError."""
        handshake = await request(SaslHandshakeRequest(mechanism=self.mechanism), handshake_version)
        if handshake.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode.from_code(handshake.error_code),
                             f"{address} does not accept SASL mechanism {self.mechanism} (it accepts "
                             f"{', '.join(handshake.mechanisms) or 'none'})")

        async def step(token: bytes) -> tuple[bytes, int]:
            response = await request(SaslAuthenticateRequest(auth_bytes=token), authenticate_version)
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode.from_code(response.error_code),
                                 f"{address} refused authentication as {self.username!r}: {response.error_message}")
            return bytes(response.auth_bytes), int(getattr(response, "session_lifetime_ms", 0) or 0)

        if self.mechanism == "PLAIN":
            _, lifetime = await step(b"\x00" + self.username.encode() + b"\x00" + self.password.encode())
            return lifetime
        if self.mechanism == "OAUTHBEARER":
            _, lifetime = await step(f"n,,\x01auth=Bearer {self._unsecured_token()}\x01\x01".encode())
            return lifetime
        return await self._scram(step, address)

    def _unsecured_token(self) -> str:
        def part(value: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

        now = int(time.time())
        return f"{part({'alg': 'none'})}.{part({'sub': self.username, 'iat': now, 'exp': now + 3600})}."

    async def _scram(self, step: Callable[[bytes], Awaitable[tuple[bytes, int]]], address: str) -> int:
        hash_name = MECHANISMS[self.mechanism]
        assert hash_name is not None
        nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        user = self.username.replace("=", "=3D").replace(",", "=2C")
        client_first_bare = f"n={user},r={nonce}"
        server_first, _ = await step(f"n,,{client_first_bare}".encode())
        attributes = dict(part.split("=", 1) for part in server_first.decode().split(",") if "=" in part)
        server_nonce, salt, iterations = attributes.get("r", ""), attributes.get("s", ""), attributes.get("i", "0")
        if not server_nonce.startswith(nonce) or not iterations.isdigit() or int(iterations) < 1:
            raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, f"{address} sent a malformed SCRAM message")
        salted = hashlib.pbkdf2_hmac(hash_name, self.password.encode(), base64.b64decode(salt), int(iterations))
        client_key = hmac.new(salted, b"Client Key", hash_name).digest()
        stored_key = hashlib.new(hash_name, client_key).digest()
        without_proof = f"c=biws,r={server_nonce}"
        auth_message = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, hash_name).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        server_final, lifetime = await step(f"{without_proof},p={proof}".encode())
        server_key = hmac.new(salted, b"Server Key", hash_name).digest()
        expected = b"v=" + base64.b64encode(hmac.new(server_key, auth_message, hash_name).digest())
        if not hmac.compare_digest(server_final, expected):
            raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, f"{address} could not prove it knows the password")
        return lifetime
