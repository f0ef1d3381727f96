"""The TLS side of SSL and SASL_SSL listeners: a server ``ssl.SSLContext`` from Kafka's keys.

Key stores are PEM (``ssl.keystore.type=PEM``; KIP-651), in a file or inline:

* ``ssl.keystore.location``: one PEM file with the private key (encrypted with ``ssl.key.password``
  or not) and the certificate chain;
* ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``: the same as PEM text in the config.

Trust stores (``ssl.truststore.type=PEM``) are ``ssl.truststore.location`` (a PEM file of CA
certificates) or ``ssl.truststore.certificates`` (PEM text); they are what client certificates are
checked against. ``ssl.client.auth`` is ``none`` (no certificate asked), ``requested`` (asked, not
required) or ``required``. JKS and PKCS12 stores are refused with a message that names PEM: Python's
``ssl`` reads PEM only.

Versions and suites, as Kafka applies them:

* ``ssl.enabled.protocols`` (``TLSv1.2,TLSv1.3``): the TLS versions accepted (the lowest to the highest
  named; OpenSSL takes a range);
* ``ssl.protocol`` (``TLSv1.3``): the context's protocol, which caps the version: ``TLSv1.2`` never
  negotiates TLS 1.3, whatever ``ssl.enabled.protocols`` says; ``TLS`` caps nothing;
* ``ssl.cipher.suites`` (empty: OpenSSL's defaults): the suites accepted, by Kafka's (IANA) names or
  OpenSSL's. Python's ``ssl`` sets the TLS 1.2 suites only: a list without TLS 1.3 suites caps the
  version at TLS 1.2 (as Java, which then has no TLS 1.3 suite to offer), a list of only TLS 1.3
  suites raises the lowest version to TLS 1.3, and a list naming only some TLS 1.3 suites keeps all
  of OpenSSL's (with a warning).

A value the local OpenSSL does not offer (a version it was built without, a suite it does not know,
versions that leave nothing) fails the start with a ConfigError that names the key.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from pathlib import Path

from kafkalite.broker.config import ConfigError
from kafkalite.broker.security.cipher_suites import OPENSSL_NAMES, TLS13_DEFAULT_SUITES, TLS13_SUITES
from kafkalite.broker.security.settings import ListenerSettings

log = logging.getLogger("kafkalite.security")

__all__ = ["server_ssl_context"]

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
             "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}
_AVAILABLE = {"TLSv1.3": ssl.HAS_TLSv1_3, "TLSv1.2": ssl.HAS_TLSv1_2, "TLSv1.1": ssl.HAS_TLSv1_1,
              "TLSv1": ssl.HAS_TLSv1}


def _store_type(settings: ListenerSettings, key: str, given: bool) -> None:
    store_type = (settings.get_str(key) or "JKS").upper()
    if given and store_type != "PEM":
        raise ConfigError(f"listener {settings.listener_name}: {key}={store_type} is not served; kafkalite reads "
                          f"PEM key and trust stores only (set {key}=PEM)")


def server_ssl_context(settings: ListenerSettings) -> ssl.SSLContext:
    """The TLS context of a listener (ConfigError when its keys do not make one)."""
    name = settings.listener_name
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions_and_suites(context, settings)
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


def _version(settings: ListenerSettings, key: str, value: str) -> ssl.TLSVersion:
    version = _VERSIONS.get(value)
    if version is None:
        raise ConfigError(f"listener {settings.listener_name}: {key}: {value!r} is not a TLS version kafkalite "
                          f"serves (one of {', '.join(_VERSIONS)})")
    if not _AVAILABLE[value]:
        raise ConfigError(f"listener {settings.listener_name}: {key}: {value} is not offered by the local OpenSSL "
                          f"({ssl.OPENSSL_VERSION})")
    return version


def _versions_and_suites(context: ssl.SSLContext, settings: ListenerSettings) -> None:
    """``ssl.enabled.protocols``, ``ssl.protocol`` and ``ssl.cipher.suites`` on the context (see the
    module docstring)."""
    name = settings.listener_name
    enabled = [_version(settings, "ssl.enabled.protocols", item) for item in settings.get_list("ssl.enabled.protocols")]
    lowest = min(enabled, default=ssl.TLSVersion.TLSv1_2)
    highest = max(enabled, default=ssl.TLSVersion.TLSv1_3)
    protocol = settings.get_str("ssl.protocol") or "TLS"
    if protocol != "TLS":
        highest = min(highest, _version(settings, "ssl.protocol", protocol))
    if lowest > highest:
        raise ConfigError(f"listener {name}: ssl.protocol={protocol} leaves none of ssl.enabled.protocols="
                          f"{settings.get_str('ssl.enabled.protocols')}")
    suites = settings.get_list("ssl.cipher.suites")
    if suites:
        tls13 = {suite for suite in suites if suite in TLS13_SUITES}
        older = [OPENSSL_NAMES.get(suite, suite) for suite in suites if suite not in TLS13_SUITES]
        for suite, openssl_name in zip([suite for suite in suites if suite not in TLS13_SUITES], older, strict=True):
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl_name)
            except ssl.SSLError:
                raise ConfigError(f"listener {name}: ssl.cipher.suites: {suite} is not a cipher suite the local "
                                  f"OpenSSL offers ({ssl.OPENSSL_VERSION})") from None
        if older:
            context.set_ciphers(":".join(older))
        else:
            lowest = max(lowest, ssl.TLSVersion.TLSv1_3)
        if not tls13:
            highest = min(highest, ssl.TLSVersion.TLSv1_2)
        elif tls13 != TLS13_DEFAULT_SUITES:
            log.warning("listener %s: ssl.cipher.suites names only some TLS 1.3 suites (%s); Python's ssl cannot "
                        "narrow them, so TLS 1.3 offers OpenSSL's defaults", name, ", ".join(sorted(tls13)))
        if lowest > highest:
            raise ConfigError(f"listener {name}: ssl.cipher.suites={','.join(suites)} has no suite for the TLS "
                              f"versions of ssl.enabled.protocols and ssl.protocol")
    context.minimum_version, context.maximum_version = lowest, highest
