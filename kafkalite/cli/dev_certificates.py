"""A development CA, a broker certificate and client certificates, as PEM files (``make_certificates``).

What ``kafkalite certs`` writes (see ``kafkalite.cli.certs`` for the files), without the command: the
test brokers and ``kafkalite serve --security`` make their certificates here, without importing click.
Needs ``cryptography`` (the ``security`` extra).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DevCertificates", "make_certificates"]


@dataclass(frozen=True, slots=True)
class DevCertificates:
    """Where ``make_certificates`` wrote each file."""

    directory: Path
    ca: Path
    ca_key: Path
    broker: Path  # key + chain: ssl.keystore.location
    broker_cert: Path
    broker_key: Path
    clients: dict[str, tuple[Path, Path]]  # name -> (certificate, key)

    @classmethod
    def existing(cls, directory: Path, clients: Sequence[str] = ()) -> DevCertificates | None:
        """The files ``make_certificates`` wrote into ``directory`` before, if they are all there."""
        found = cls(directory, directory / "ca.pem", directory / "ca-key.pem", directory / "broker.pem",
                    directory / "broker-cert.pem", directory / "broker-key.pem",
                    {client: (directory / f"{client}.pem", directory / f"{client}-key.pem") for client in clients})
        paths = [found.ca, found.broker, *(path for pair in found.clients.values() for path in pair)]
        return found if all(path.exists() for path in paths) else None

    def broker_settings(self, key_password: str | None = None) -> dict[str, str]:
        """The broker keys for a PEM key store and trust store of these files."""
        settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.broker),
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)}
        if key_password:
            settings["ssl.key.password"] = key_password
        return settings


def _write(path: Path, data: bytes, private: bool = False) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def make_certificates(directory: str | os.PathLike[str], hosts: Sequence[str] = ("localhost", "127.0.0.1", "::1"),
                      clients: Sequence[str] = (), *, days: int = 825, key_password: str | None = None,
                      ca_name: str = "kafkalite development CA") -> DevCertificates:
    """Write a CA, a broker certificate for ``hosts`` and one certificate per client (see the module docstring)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:
        raise RuntimeError("kafkalite certs needs the cryptography package (pip install 'kafkalite[security]')") \
            from exc
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    expires = now + datetime.timedelta(days=days)

    def key_pem(key: Any, password: str | None = None) -> bytes:
        encryption: Any = (serialization.BestAvailableEncryption(password.encode()) if password
                           else serialization.NoEncryption())
        return bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))

    def cert_pem(cert: Any) -> bytes:
        return bytes(cert.public_bytes(serialization.Encoding.PEM))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkalite"),
                            x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_subject).issuer_name(ca_subject)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(expires)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))

    def issue(common_name: str, usage: Any, names: Sequence[str] = ()) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkalite"),
                                            x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
                   .issuer_name(ca_subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(expires)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                                  critical=False))
        if names:
            alternatives: list[Any] = []
            for name in names:
                try:
                    alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
                except ValueError:
                    alternatives.append(x509.DNSName(name))
            builder = builder.add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    broker_key, broker_cert = issue(hosts[0] if hosts else "localhost", ExtendedKeyUsageOID.SERVER_AUTH, hosts)
    written = DevCertificates(out, out / "ca.pem", out / "ca-key.pem", out / "broker.pem", out / "broker-cert.pem",
                              out / "broker-key.pem", {})
    _write(written.ca, cert_pem(ca_cert))
    _write(written.ca_key, key_pem(ca_key), private=True)
    _write(written.broker, key_pem(broker_key, key_password) + cert_pem(broker_cert) + cert_pem(ca_cert),
           private=True)
    _write(written.broker_cert, cert_pem(broker_cert) + cert_pem(ca_cert))
    _write(written.broker_key, key_pem(broker_key, key_password), private=True)
    for client in clients:
        client_key, client_cert = issue(client, ExtendedKeyUsageOID.CLIENT_AUTH)
        paths = (out / f"{client}.pem", out / f"{client}-key.pem")
        _write(paths[0], cert_pem(client_cert))
        _write(paths[1], key_pem(client_key), private=True)
        written.clients[client] = paths
    return written
