"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): stored credentials and the server's exchange.

Credentials: for each user and mechanism, Kafka keeps the salt, the iteration count, ``StoredKey``
(H(HMAC(SaltedPassword, "Client Key"))) and ``ServerKey`` (HMAC(SaltedPassword, "Server Key")); never the
password nor the salted password. AlterUserScramCredentials sends the salted password, from which
the broker derives the two keys. ``ScramCredentials`` keeps them in ``<data dir>/scram-credentials.json``
(written atomically: a temporary file fsynced and renamed over the old one), as Kafka keeps them in its
metadata log; without a data directory they live as long as the process.

The exchange (``ScramExchange``), three messages::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<proof>
    server-final   v=<server signature>

A user that does not exist goes through the same steps with a salt made from the user name and a
secret of this process, and fails at the proof as a wrong password does: the answers say nothing of
which part was wrong.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkalite.broker.core.durable import write_durably

__all__ = ["MECHANISMS", "MIN_ITERATIONS", "MAX_ITERATIONS", "ScramCredential", "ScramCredentials",
           "ScramExchange", "ScramFailure", "derive_credential"]

log = logging.getLogger("kafkalite.security")

SCRAM_CREDENTIALS_FILE = "scram-credentials.json"
# AlterUserScramCredentials' mechanism numbers, and the hash of each mechanism.
MECHANISMS: dict[str, tuple[int, str]] = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds
_PROCESS_SECRET = secrets.token_bytes(32)


class ScramFailure(Exception):
    """The exchange failed (the message is for the log, never for the client)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict[str, object]:
        return {"salt": base64.b64encode(self.salt).decode(), "stored_key": base64.b64encode(self.stored_key).decode(),
                "server_key": base64.b64encode(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ScramCredential:
        return cls(base64.b64decode(str(data["salt"])), base64.b64decode(str(data["stored_key"])),
                   base64.b64decode(str(data["server_key"])), int(str(data["iterations"])))


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def derive_credential(mechanism: str, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential of a salted password (RFC 5802 section 3)."""
    hash_name = MECHANISMS[mechanism][1]
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted_password, b"Server Key"), iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password.encode("utf-8"), salt, iterations)


class ScramCredentials:
    """Every user's SCRAM credentials, durable in the data directory."""

    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else data_dir / SCRAM_CREDENTIALS_FILE
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        content = json.loads(self.path.read_text(encoding="utf-8"))
        self._users = {user: {mechanism: ScramCredential.from_json(data) for mechanism, data in mechanisms.items()}
                       for user, mechanisms in content.get("users", {}).items()}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._users)

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def set(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        mechanisms = self._users.get(user)
        if mechanisms is None or mechanism not in mechanisms:
            return False
        del mechanisms[mechanism]
        if not mechanisms:
            del self._users[user]
        return True

    def save(self) -> None:
        if self.path is None:
            return
        content = {"version": 1, "users": {user: {mechanism: credential.to_json()
                                                  for mechanism, credential in mechanisms.items()}
                                           for user, mechanisms in self._users.items()}}
        write_atomically(self.path, json.dumps(content, indent=1, sort_keys=True).encode("utf-8"))


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` (readable by its owner only: it holds credentials) so that a crash leaves the old
    content or the new, never a part."""
    write_durably(path, data, mode=0o600, make_parent=True)


def _attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in message.split(","):
        name, equals, value = part.partition("=")
        if not equals or len(name) != 1:
            raise ScramFailure(f"malformed SCRAM message part {part[:40]!r}")
        attributes.setdefault(name, value)
    return attributes


def _unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramFailure("malformed SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """One SCRAM authentication on the server side (see the module docstring)."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None],
                 server_nonce: Callable[[], str] | None = None) -> None:
        self.mechanism = mechanism
        self._server_nonce = server_nonce or (lambda: base64.b64encode(secrets.token_bytes(18)).decode())
        self._hash = MECHANISMS[mechanism][1]
        self._lookup = lookup
        self._step = 0
        self._client_first_bare = self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.user: str | None = None  # set once the proof checked out
        self.complete = False

    def step(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailure("SCRAM message is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._first(text)
        if self._step == 1:
            self._step = 2
            return self._final(text)
        raise ScramFailure("SCRAM message after the exchange ended")

    def _first(self, text: str) -> bytes:
        gs2_flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if gs2_flag not in ("n", "y") or not bare:
            raise ScramFailure("SCRAM client-first message without a GS2 header")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise ScramFailure("SCRAM client-first message without a user name or nonce")
        self._user_name = _unescape_name(attributes["n"])
        if authzid and authzid != f"a={attributes['n']}":
            raise ScramFailure("SCRAM authorization id differs from the user name")
        credential = self._lookup(self._user_name, self.mechanism)
        if credential is None:  # go on as for a known user, and fail at the proof
            salt = _hmac("sha256", _PROCESS_SECRET, self._user_name.encode("utf-8"))[:16]
            credential = ScramCredential(salt, secrets.token_bytes(32), secrets.token_bytes(32), MIN_ITERATIONS)
            self._known = False
        else:
            self._known = True
        self._credential = credential
        self._client_first_bare = bare
        self._nonce = attributes["r"] + self._server_nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first.encode("utf-8")

    def _final(self, text: str) -> bytes:
        without_proof, _, proof_part = text.rpartition(",p=")
        if not without_proof:
            raise ScramFailure("SCRAM client-final message without a proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce:
            raise ScramFailure("SCRAM nonce does not match")
        channel_binding = attributes.get("c", "")
        if channel_binding not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            raise ScramFailure("SCRAM channel binding is not the GS2 header without binding")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramFailure("SCRAM proof is not base64") from None
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramFailure("SCRAM proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key) \
                or not self._known:
            raise ScramFailure("SCRAM proof does not match")
        self.user = self._user_name
        self.complete = True
        signature = _hmac(self._hash, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(signature)
