"""The TLS side of SSL and SASL_SSL listeners: a server ``ssl.SSLContext`` from Kafka's keys.

Key stores are PEM (``ssl.keystore.type=PEM``; KIP-651), in a file or inline:

* ``ssl.keystore.location``: one PEM file with the private key (encrypted with ``ssl.key.password``
  or not) and the certificate chain;
* ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``: the same as PEM text in the config.

Trust stores (``ssl.truststore.type=PEM``) are ``ssl.truststore.location`` (a PEM file of CA
certificates) or ``ssl.truststore.certificates`` (PEM text); they are what client certificates are
checked against. ``ssl.client.auth`` is ``none`` (no certificate asked), ``requested`` (asked, not
required) or ``required``. ``ssl.enabled.protocols`` sets the lowest TLS version accepted. JKS and
PKCS12 stores are refused with a message that names PEM: Python's ``ssl`` reads PEM only.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from kafkalite.broker.config import ConfigError
from kafkalite.broker.security.settings import ListenerSettings

__all__ = ["server_ssl_context"]

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
             "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}


def _store_type(settings: ListenerSettings, key: str, given: bool) -> None:
    store_type = (settings.get_str(key) or "JKS").upper()
    if given and store_type != "PEM":
        raise ConfigError(f"listener {settings.listener_name}: {key}={store_type} is not served; kafkalite reads "
                          f"PEM key and trust stores only (set {key}=PEM)")


def server_ssl_context(settings: ListenerSettings) -> ssl.SSLContext:
    """The TLS context of a listener (ConfigError when its keys do not make one)."""
    name = settings.listener_name
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [_VERSIONS[item] for item in settings.get_list("ssl.enabled.protocols") if item in _VERSIONS]
    if enabled:
        context.minimum_version = min(enabled)
        context.maximum_version = max(enabled)
    location = settings.get_str("ssl.keystore.location")
    chain = settings.get_str("ssl.keystore.certificate.chain")
    key = settings.get_str("ssl.keystore.key")
    password = settings.get_str("ssl.key.password") or settings.get_str("ssl.keystore.password")
    _store_type(settings, "ssl.keystore.type", bool(location or chain))
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif chain and key:
            _load_inline(context, chain, key, password)
        else:
            raise ConfigError(f"listener {name} uses TLS but has no key store: set ssl.keystore.type=PEM and "
                              "ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {name}: cannot load its certificate and key: {exc}") from None
    trust_location = settings.get_str("ssl.truststore.location")
    trusted = settings.get_str("ssl.truststore.certificates")
    _store_type(settings, "ssl.truststore.type", bool(trust_location or trusted))
    try:
        if trust_location:
            context.load_verify_locations(cafile=trust_location)
        elif trusted:
            context.load_verify_locations(cadata=trusted)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {name}: cannot load its trust store: {exc}") from None
    client_auth = (settings.get_str("ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"listener {name}: ssl.client.auth={client_auth} is not one of required, requested, none")
    if client_auth != "none" and not (trust_location or trusted):
        raise ConfigError(f"listener {name}: ssl.client.auth={client_auth} needs a trust store "
                          "(ssl.truststore.location or ssl.truststore.certificates)")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    return context


def _load_inline(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """``load_cert_chain`` reads files only: the inline PEM goes through a private temporary file."""
    with tempfile.TemporaryDirectory(prefix="kafkalite-tls-") as directory:
        path = Path(directory) / "keystore.pem"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
