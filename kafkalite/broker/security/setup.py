"""From the broker config to each listener's ``ListenerSecurity``: TLS context, SASL settings, authorizer.

``BrokerSecurity.build(config, scram, acls)`` reads, for each listener, its security protocol
(``listener.security.protocol.map``), its TLS keys when the protocol is SSL or SASL_SSL, and its
SASL keys when the protocol is SASL_PLAINTEXT or SASL_SSL: ``sasl.enabled.mechanisms`` and the PLAIN
users of ``PlainLoginModule``, looked up as Kafka does, the first of::

    listener.name.<listener>.plain.sasl.jaas.config
    listener.name.<listener>.sasl.jaas.config
    plain.sasl.jaas.config
    sasl.jaas.config

A TLS listener's key and trust stores (Kafka's dynamic ones: ``PER_LISTENER_KEYS``, set under the
listener's prefix) change at run time through AlterConfigs: ``KeyStoreReloader`` builds the new
context when the change is offered (a store that does not load refuses the change with
INVALID_CONFIG, and the old context stays), then hands it to the listener: later connections
present the new certificate, connections already made keep theirs.

``authorizer.class.name`` set to Kafka's StandardAuthorizer (or the older AclAuthorizer names)
switches ACLs on for every listener, with ``super.users`` (``User:a;User:b``) and
``allow.everyone.if.no.acl.found``; any other non-empty class name is refused.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from kafkalite.broker.config import PER_LISTENER_KEYS, BrokerConfig, ConfigError
from kafkalite.broker.security.acls import AclStore
from kafkalite.broker.security.authorizer import AUTHORIZER_CLASS_NAMES, Authorizer
from kafkalite.broker.security.connection import ListenerSecurity
from kafkalite.broker.security.jaas import parse_jaas
from kafkalite.broker.security.principal import SslPrincipalMapper
from kafkalite.broker.security.sasl import SERVED_MECHANISMS, SaslSettings
from kafkalite.broker.security.scram import ScramCredentials
from kafkalite.broker.security.settings import ListenerSettings
from kafkalite.broker.security.tls import server_ssl_context

__all__ = ["BrokerSecurity", "KeyStoreReloader", "authorizer_from_config"]

log = logging.getLogger("kafkalite.security")

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def authorizer_from_config(config: BrokerConfig, acls: AclStore) -> Authorizer | None:
    class_name = config.get_str("authorizer.class.name") if config.get("authorizer.class.name") else ""
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(f"authorizer.class.name={class_name} is not served; kafkalite has Kafka's StandardAuthorizer "
                          "(org.apache.kafka.metadata.authorizer.StandardAuthorizer)")
    super_users = [item.strip() for item in (config.get("super.users") or "").split(";") if item.strip()]
    return Authorizer(acls, super_users, config.get_bool("allow.everyone.if.no.acl.found"))


def _plain_users(settings: ListenerSettings) -> dict[str, str]:
    config = settings.config
    candidates = [settings.prefix + "plain.sasl.jaas.config", settings.prefix + "sasl.jaas.config",
                  "plain.sasl.jaas.config", "sasl.jaas.config"]
    for key in candidates:
        if not config.is_set(key):
            continue
        text = config.get(key)
        try:
            entries = parse_jaas(str(text))
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
        for entry in entries:
            if entry.login_module == PLAIN_LOGIN_MODULE:
                return {name.removeprefix("user_"): password for name, password in entry.options.items()
                        if name.startswith("user_")}
    return {}


@dataclass(frozen=True, slots=True)
class BrokerSecurity:
    """Every listener's security, by listener name."""

    listeners: dict[str, ListenerSecurity]

    @classmethod
    def build(cls, config: BrokerConfig, scram: ScramCredentials, acls: AclStore) -> BrokerSecurity:
        authorizer = authorizer_from_config(config, acls)
        protocols = config.listener_security_protocols()
        listeners: dict[str, ListenerSecurity] = {}
        for listener in config.listeners():
            protocol = protocols[listener.name]
            settings = ListenerSettings(config, listener.name)
            ssl_context = mapper = sasl = None
            if protocol in ("SSL", "SASL_SSL"):
                ssl_context = server_ssl_context(settings)
                if protocol == "SSL" and (settings.get_str("ssl.client.auth") or "none").lower() != "none":
                    try:
                        mapper = SslPrincipalMapper.parse(settings.get_str("ssl.principal.mapping.rules") or "DEFAULT")
                    except ValueError as exc:
                        raise ConfigError(str(exc)) from None
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                mechanisms = tuple(item.upper() for item in settings.get_list("sasl.enabled.mechanisms"))
                unserved = [item for item in mechanisms if item not in SERVED_MECHANISMS]
                if unserved:
                    log.warning("listener %s: SASL mechanisms %s are not served (kafkalite serves %s)", listener.name,
                                ", ".join(unserved), ", ".join(SERVED_MECHANISMS))
                mechanisms = tuple(item for item in mechanisms if item in SERVED_MECHANISMS)
                if not mechanisms:
                    raise ConfigError(f"listener {listener.name} uses {protocol} but sasl.enabled.mechanisms names no "
                                      f"mechanism kafkalite serves ({', '.join(SERVED_MECHANISMS)})")
                plain_users = _plain_users(settings)
                if "PLAIN" in mechanisms and not plain_users:
                    log.warning("listener %s: PLAIN is enabled but no PlainLoginModule user_<name> is configured",
                                listener.name)
                sasl = SaslSettings(mechanisms, plain_users, scram,
                                    reauth_ms=config.get_int("connections.max.reauth.ms"),
                                    oauth_sub_claim=settings.get_str("sasl.oauthbearer.sub.claim.name") or "sub",
                                    oauth_clock_skew_s=config.get_int("sasl.oauthbearer.clock.skew.seconds"))
            listeners[listener.name] = ListenerSecurity(
                listener.name, protocol, ssl_context, mapper, sasl, authorizer,
                max_receive_size=config.get_int("sasl.server.max.receive.size"),
                authentication_timeout_ms=config.get_int("sasl.server.authentication.timeout.ms"),
                failed_authentication_delay_ms=config.get_int("connection.failed.authentication.delay.ms"))
        return cls(listeners)

    @property
    def needed(self) -> bool:
        """Whether some listener needs more than a plain connection."""
        return any(not listener.plain for listener in self.listeners.values())


_TLS_KEYS = tuple(sorted({*PER_LISTENER_KEYS, "ssl.client.auth", "ssl.protocol", "ssl.enabled.protocols",
                          "ssl.cipher.suites"}))


class KeyStoreReloader:
    """The TLS listeners' contexts, rebuilt when a dynamic change touches their keys (see the module
    docstring); ``install(listener_name, context)`` gives a new one to the listener's acceptors."""

    def __init__(self, config: BrokerConfig, security: BrokerSecurity,
                 install: Callable[[str, ssl.SSLContext], None]) -> None:
        self.config, self.security, self.install = config, security, install
        self._applied = {name: self._keys(name) for name, listener in security.listeners.items()
                         if listener.ssl_context is not None}

    def _keys(self, listener_name: str) -> tuple[object, ...]:
        settings = ListenerSettings(self.config, listener_name)
        return tuple(settings.get(key) for key in _TLS_KEYS)

    def prepare_reconfiguration(self) -> Callable[[], None] | None:
        contexts: dict[str, tuple[ssl.SSLContext, tuple[object, ...]]] = {}
        for name, applied in self._applied.items():
            keys = self._keys(name)
            if keys != applied:
                contexts[name] = (server_ssl_context(ListenerSettings(self.config, name)), keys)
        if not contexts:
            return None

        def apply() -> None:
            for name, (context, keys) in contexts.items():
                self._applied[name] = keys
                listeners = self.security.listeners
                listeners[name] = dataclasses.replace(listeners[name], ssl_context=context)
                self.install(name, context)
                log.info("listener %s: new connections use the key and trust stores as now configured", name)

        return apply
