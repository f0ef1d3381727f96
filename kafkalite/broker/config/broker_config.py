"""The broker's configuration: where each value comes from, typed access, dynamic broker configs.

Where a value comes from, lowest precedence first (later wins):

1. the key's default in ``BROKER_KEYS``;
2. the properties file (``--config``, Kafka's ``server.properties`` format);
3. ``KAFKALITE_*`` environment variables (``KAFKALITE_LOG_RETENTION_HOURS=1`` sets ``log.retention.hours``);
4. overrides (command-line flags and ``key=value`` arguments);
5. dynamic broker configs set at run time by AlterConfigs: the cluster-wide default (the BROKER
   resource named ""), then this node's.

Sources 2-4 are "static" (``STATIC_BROKER_CONFIG`` in DescribeConfigs). Values are validated when they
are loaded or set, so a bad value fails at start-up with a message naming the key. Keys the table
does not know are kept as strings (logged once at debug level), so a Kafka ``server.properties``
from any version loads unchanged.

Dynamic values follow Kafka's rules (``alter_dynamic``): only keys Kafka updates dynamically may be
set; the TLS keys in ``PER_LISTENER_KEYS`` only under a listener prefix
(``listener.name.<listener>.<key>``, whose type is the base key's); per-broker keys not for the
whole cluster; keys nobody knows are accepted and kept, as Kafka keeps custom keys. Every refusal
is INVALID_REQUEST with Kafka's message. Dynamic values are kept as the strings that were set, so
that the cluster can store them (``core.dynamic_configs``) and DescribeConfigs can report them.

Topic configs (``TOPIC_KEYS``: ``retention.ms``, ``segment.bytes``...) take their default from broker
keys, in Kafka's precedence and with unit translation: ``retention.ms`` comes from ``log.retention.ms``,
else ``log.retention.minutes`` x 60 000, else ``log.retention.hours`` x 3 600 000.
``topic_settings(topic_overrides)`` gives the merged result as a typed :class:`TopicConfig`.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kafkalite.broker.config.keys import (
    ConfigError,
    ConfigKey,
    ConfigSource,
    ConfigType,
    listener_base_key,
)
from kafkalite.broker.config.table import TOPIC_KEYS, TopicConfig, all_broker_keys, find_broker_key
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.broker.config.entries import ConfigEntry, ConfigSynonym

__all__ = [
    "BrokerConfig",
    "ENV_PREFIX",
    "Listener",
    "config_field",
    "parse_listener",
    "read_properties",
]

log = logging.getLogger("kafkalite.config")

ENV_PREFIX = "KAFKALITE_"


@dataclass(frozen=True, slots=True)
class Listener:
    """A listener or advertised listener: ``NAME://host:port``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.%\w]*\]|[^:/\[\]]*):(\d{1,5})$")
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_listener(text: str) -> Listener:
    """Parse ``NAME://host:port`` (IPv6 hosts in brackets); ConfigError when malformed."""
    match = _LISTENER.match(text.strip())
    if match is None or int(match.group(3)) > 65535:
        raise ConfigError(f"Invalid listener {text!r}: expected NAME://host:port, for example PLAINTEXT://localhost:9092")
    name, host, port = match.groups()
    return Listener(name.upper(), host.strip("[]"), int(port))


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java ``.properties`` file: ``#``/``!`` comments, ``key=value``, ``key: value`` or
    ``key value``, backslash line continuations and escapes (``\\t``, ``\\n``, ``\\uXXXX``, ``\\=``...).
    Later keys win. The file is read as UTF-8 (a superset of the ASCII Kafka's files use)."""
    values: dict[str, str] = {}
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].lstrip()
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip()
            index += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_property(line)
        values[key] = value
    return values


def _continues(line: str) -> bool:
    """A line continues when it ends with an odd number of backslashes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _split_property(line: str) -> tuple[str, str]:
    """Split one logical line at the first unescaped '=', ':' or whitespace; unescape both halves."""
    position = 0
    while position < len(line):
        char = line[position]
        if char == "\\":
            position += 2
            continue
        if char in "=: \t\f":
            break
        position += 1
    key, rest = line[:position], line[position:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\" or position + 1 >= len(text):
            out.append(char)
            position += 1
            continue
        escaped = text[position + 1]
        if escaped == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[position + 2:position + 6]):
            out.append(chr(int(text[position + 2:position + 6], 16)))
            position += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        position += 2
    return "".join(out)


# KAFKALITE_* variables that are not broker configs: the CLI's default bootstrap server and admin
# endpoint, and the code generator's schema directory.
NOT_BROKER_CONFIGS = frozenset({"KAFKALITE_BOOTSTRAP_SERVER", "KAFKALITE_ADMIN_URL", "KAFKALITE_SCHEMAS"})


def _keys_from_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``KAFKALITE_LOG_RETENTION_HOURS=1`` -> ``{"log.retention.hours": "1"}``."""
    return {name[len(ENV_PREFIX):].lower().replace("_", "."): value
            for name, value in environ.items()
            if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX) and name not in NOT_BROKER_CONFIGS}


_reported_unknown: set[str] = set()
_LISTENER_PREFIX = r"^listener\.name\.[^.]+\."  # compiled by re.sub on the first unknown key


def _warn_unknown(key: str) -> None:
    """An unknown key is kept (Kafka accepts custom keys) and said once, with the known key it is closest to.

    ``listener.name.<listener>.<key>`` is a per-listener setting of ``<key>``: known when ``<key>`` is."""
    import difflib

    broker_keys = all_broker_keys()
    base = re.sub(_LISTENER_PREFIX, "", key)
    if base != key and (base in broker_keys or base.startswith(("sasl.", "ssl.", "plain.", "scram-", "oauthbearer."))):
        return
    nearest = difflib.get_close_matches(key, broker_keys, n=1, cutoff=0.8)
    if nearest:
        log.warning("unknown config key %s, kept without effect; did you mean %s?", key, nearest[0])
    else:
        log.warning("unknown config key %s, kept without effect", key)
_Settings = TypeVar("_Settings")


def config_field(key: str, scale: int = 1) -> Any:
    """A settings dataclass field that mirrors broker key ``key`` (times ``scale``, for unit changes):
    its default is the table's, and :meth:`BrokerConfig.settings` fills it from the configuration."""
    known = find_broker_key(key)
    if known is None:
        raise KeyError(key)
    default = known.default
    default = tuple(default) if isinstance(default, list) else default * scale
    return field(default=default, metadata={"config_key": key, "scale": scale})


class BrokerConfig:
    """The broker's configuration: static values (file, environment, overrides) plus dynamic ones.

    Read with ``get`` and the typed ``get_int``/``get_bool``/``get_str``/``get_list``; derived values
    with ``data_dir``, ``listeners``, ``advertised_listeners`` and ``topic_settings``.
    """

    def __init__(self, static: Mapping[str, str] | None = None) -> None:
        self._static_raw: dict[str, str] = {}
        self._values: dict[str, Any] = {}  # parsed static values of known keys
        self._dynamic_default = _DynamicLayer()  # AlterConfigs on the cluster-wide default ("")
        self._dynamic_node = _DynamicLayer()  # AlterConfigs on this node
        for key, raw in (static or {}).items():
            self._set_static(key.strip(), raw)
        self._check()

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> BrokerConfig:
        """The properties file, then ``KAFKALITE_*`` environment variables, then overrides; later wins."""
        merged: dict[str, str] = {}
        if path is not None:
            merged.update(read_properties(path))
        merged.update(_keys_from_environ(environ))
        merged.update(overrides or {})
        return cls(merged)

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        """A new config with these static values added (dynamic values are not carried over)."""
        return BrokerConfig({**self._static_raw, **overrides})

    def _set_static(self, key: str, raw: str) -> None:
        self._static_raw[key] = raw
        known = find_broker_key(key)
        if known is None:
            if key not in _reported_unknown:
                _reported_unknown.add(key)
                _warn_unknown(key)
            return
        self._values[key] = known.parse(raw)

    def _check(self) -> None:
        """Cross-key checks, done once at load."""
        node_id, broker_id = self._values.get("node.id"), self._values.get("broker.id")
        if node_id is not None and broker_id is not None and node_id != broker_id:
            raise ConfigError(f"node.id={node_id} and broker.id={broker_id} disagree; set only one")
        self.listeners()
        self.advertised_listeners(resolve_wildcards=False)

    # typed access ----------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """The effective value of a key: dynamic, then static, then the default; typed for known keys.

        Unknown keys that were configured return their string; other unknown keys raise KeyError.
        """
        known = find_broker_key(key)
        if known is None:
            return self._static_raw[key]
        if known.alias_of is not None:
            return self.get(known.alias_of)
        for layer in (self._dynamic_node.values, self._dynamic_default.values, self._values):
            if key in layer:
                return layer[key]
        if key == "node.id" and "broker.id" in self._values:
            return self._values["broker.id"]
        return known.default

    def is_set(self, key: str) -> bool:
        """Whether a key was given a value (statically or dynamically) rather than left at its default."""
        return key in self._static_raw or key in self._dynamic_node.raw or key in self._dynamic_default.raw

    def get_int(self, key: str) -> int:
        value = self.get(key)
        if isinstance(value, bool) or value is None:
            raise ConfigError(f"{key} is {value!r}, not an integer")
        return int(value)

    def get_bool(self, key: str) -> bool:
        value = self.get(key)
        if isinstance(value, str):  # an unknown key, kept as text
            return bool(ConfigKey(key, ConfigType.BOOLEAN, None, "").parse(value))
        return bool(value)

    def get_str(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise ConfigError(f"{key} has no value")
        return ",".join(value) if isinstance(value, list) else str(value)

    def get_list(self, key: str) -> list[str]:
        value = self.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return list(value)

    def settings(self, cls: type[_Settings]) -> _Settings:
        """An instance of a settings dataclass whose fields are made with :func:`config_field`, holding
        this configuration's values (lists as tuples; an empty list keeps the default)."""
        values: dict[str, Any] = {}
        for item in fields(cls):  # type: ignore[arg-type]  # cls is a dataclass, which a TypeVar cannot say
            key = item.metadata.get("config_key")
            if key is None:
                continue
            value = self.get(key)
            if isinstance(value, list):
                if value:
                    values[item.name] = tuple(value)
            elif value is not None:
                values[item.name] = value * item.metadata["scale"]
        return cls(**values)

    # derived values --------------------------------------------------------------------------
    def data_dir(self) -> Path | None:
        """The data directory (the first of log.dirs, else log.dir); None when log.storage=memory."""
        dirs = self.log_dirs()
        return dirs[0] if dirs else None

    def log_dirs(self) -> list[Path]:
        """Every log directory (log.dirs, else log.dir), without repeats; none when log.storage=memory."""
        if self.get("log.storage") == "memory":
            return []
        dirs = self.get_list("log.dirs") or [self.get_str("log.dir")]
        return list(dict.fromkeys(Path(item).expanduser() for item in dirs))

    def listener_security_protocols(self) -> dict[str, str]:
        """listener.security.protocol.map: listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        protocols = {}
        for item in self.get_list("listener.security.protocol.map"):
            name, _, mapped = item.partition(":")
            protocols[name.strip().upper()] = mapped.strip().upper()
        return protocols

    def listeners(self) -> list[Listener]:
        """The listeners to bind, controller listeners left out."""
        protocols = self.listener_security_protocols()
        controller_names = {name.upper() for name in self.get_list("controller.listener.names")}
        listeners = [parse_listener(text) for text in self.get_list("listeners")]
        _check_unique(listeners, "listeners")
        served = [listener for listener in listeners if listener.name not in controller_names]
        if not served:
            raise ConfigError("listeners has no listener to serve clients on")
        for listener in served:
            protocol = protocols.get(listener.name)
            if protocol is None:
                raise ConfigError(f"listener {listener} is not in listener.security.protocol.map")
            if protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(f"listener {listener} uses {protocol}, which is not one of "
                                  f"{', '.join(SECURITY_PROTOCOLS)}")
        return served

    def advertised_listeners(self, resolve_wildcards: bool = True) -> list[Listener]:
        """What clients are told to connect to. Port 0 means "the port its listener bound"."""
        if self.is_set("advertised.listeners"):
            advertised = [parse_listener(text) for text in self.get_list("advertised.listeners")]
            _check_unique(advertised, "advertised.listeners")
            for listener in advertised:
                if listener.host in _WILDCARD_HOSTS:
                    raise ConfigError(f"advertised.listeners cannot use the wildcard address in {listener}")
            return advertised
        listeners = self.listeners()
        if not resolve_wildcards:
            return listeners
        return [Listener(item.name, _advertised_host() if item.host in _WILDCARD_HOSTS else item.host, item.port)
                for item in listeners]

    # topic configs ---------------------------------------------------------------------------
    def validate_topic_config(self, key: str, value: str | None) -> Any:
        """Check one topic config from CreateTopics/AlterConfigs; return its typed value (None deletes)."""
        known = TOPIC_KEYS.get(key)
        if known is None:
            raise ConfigError(f"Unknown topic config name: {key}")
        return None if value is None else known.parse(value)

    def topic_config(self, key: str, topic_overrides: Mapping[str, str] | None = None) -> Any:
        """The typed effective value of a topic key: the override, else the broker default."""
        known = TOPIC_KEYS.get(key)
        if known is None:
            raise ConfigError(f"Unknown topic config name: {key}")
        if topic_overrides and topic_overrides.get(key) is not None:
            return known.parse(topic_overrides[key])
        for broker_key, multiplier in known.synonyms:
            value = self.get(broker_key)
            if value is not None:
                return value * multiplier if multiplier != 1 else value
        return known.default

    def topic_config_default(self, key: str) -> str:
        """The broker default of a topic key, as Kafka shows it (``retention.ms`` -> "604800000")."""
        return TOPIC_KEYS[key].format(self.topic_config(key)) or ""

    def effective_topic_config(self, topic_overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Every topic key's typed value for a topic with these overrides (unknown keys are ignored)."""
        return {key: self.topic_config(key, topic_overrides) for key in TOPIC_KEYS}

    def topic_settings(self, topic_overrides: Mapping[str, str] | None = None) -> TopicConfig:
        """A topic's effective configs as typed attributes (the override, else the broker default).

        Built once when a topic's overrides or a broker default change, so that the produce and fetch
        paths read attributes rather than looking keys up."""
        values: dict[str, Any] = {key.replace(".", "_"): tuple(value) if isinstance(value, list) else value
                                  for key, value in self.effective_topic_config(topic_overrides).items()}
        return TopicConfig(**values)

    # dynamic broker configs ------------------------------------------------------------------
    def dynamic_configs(self, cluster_default: bool = False) -> dict[str, str]:
        """The dynamic values set on this node (or as the cluster-wide default), as they were set."""
        return dict(self._layer(cluster_default).raw)

    def alter_dynamic(self, changes: Mapping[str, str | None], *, cluster_default: bool = False,
                      validate_only: bool = False) -> dict[str, str]:
        """Apply ``changes`` (None deletes a key) to this node's dynamic configs, or to the cluster-wide
        default, after checking the whole result as Kafka does (see the module docstring). Returns the
        layer's new values; with ``validate_only`` nothing changes."""
        layer = self._layer(cluster_default)
        raw = dict(layer.raw)
        for key, value in changes.items():
            if value is None:
                raw.pop(key, None)
            else:
                raw[key] = value
        values = self.validate_dynamic(raw, cluster_default=cluster_default)
        if not validate_only:
            layer.raw, layer.values = raw, values
        return dict(raw)

    def validate_dynamic(self, raw: Mapping[str, str], *, cluster_default: bool = False) -> dict[str, Any]:
        """Kafka's checks of a BROKER resource's dynamic configs, in Kafka's order; the typed values of
        the known keys. ConfigError (INVALID_REQUEST) with Kafka's message otherwise."""
        from kafkalite.broker.config.kafka_keys import PER_LISTENER_KEYS

        broker_keys = all_broker_keys()
        read_only = [key for key in raw if key in broker_keys and not broker_keys[key].dynamic]
        _refuse(read_only, "Cannot update these configs dynamically")
        _refuse([key for key in raw if key in PER_LISTENER_KEYS],
                "These security configs can be dynamically updated only per-listener using the listener prefix")
        values: dict[str, Any] = {}
        for key, value in raw.items():
            known = _base_key(key)
            if known is None:
                continue
            try:
                parsed = known.parse(value)
                if known.name == "listeners":
                    [parse_listener(text) for text in parsed.split(",") if text.strip()]
            except ConfigError as exc:
                raise ConfigError(exc.message, ErrorCode.INVALID_REQUEST) from None
            if key == known.name:
                values[key] = parsed
        if cluster_default:
            _refuse([key for key in raw if _per_broker(key)],
                    "Cannot update these configs at default cluster level, broker id must be specified")
        return values

    def load_dynamic(self, raw: Mapping[str, str], *, cluster_default: bool = False) -> None:
        """Install stored dynamic values at start-up; a value that no longer passes the checks is
        dropped with an error in the log, as Kafka does, and the others are kept."""
        kept: dict[str, str] = {}
        for key, value in raw.items():
            try:
                self.validate_dynamic({key: value}, cluster_default=cluster_default)
            except ConfigError as exc:
                log.error("ignoring the stored dynamic %s config %s: %s",
                          "cluster-wide" if cluster_default else "broker", key, exc.message)
                continue
            kept[key] = value
        layer = self._layer(cluster_default)
        layer.raw, layer.values = kept, self.validate_dynamic(kept, cluster_default=cluster_default)

    def set_broker_config(self, key: str, value: str | None, cluster_default: bool = False) -> None:
        """One dynamic change (``alter_dynamic`` with one key); ``None`` deletes."""
        self.alter_dynamic({key: value}, cluster_default=cluster_default)

    def delete_broker_config(self, key: str, cluster_default: bool = False) -> None:
        """Remove a dynamic value; the static or default value applies again."""
        self.alter_dynamic({key: None}, cluster_default=cluster_default)

    def _layer(self, cluster_default: bool) -> _DynamicLayer:
        return self._dynamic_default if cluster_default else self._dynamic_node

    # DescribeConfigs -------------------------------------------------------------------------
    def describe(self, keys: Iterable[str] | None = None) -> list[ConfigEntry]:
        """The broker resource: every known key (or those asked for), with value and source, then the
        keys the table does not know that were set, statically or dynamically (as Kafka lists them:
        sensitive, without a type unless a listener prefix names a known key)."""
        from kafkalite.broker.config.entries import ConfigEntry, ConfigSynonym

        broker_keys = all_broker_keys()
        wanted = None if keys is None else set(keys)
        entries = []
        for name, known in broker_keys.items():
            if wanted is not None and name not in wanted:
                continue
            canonical = known.alias_of or name
            synonyms = self._broker_synonyms(canonical)
            value, source = (synonyms[0].value, synonyms[0].source) if synonyms else (None, ConfigSource.DEFAULT_CONFIG)
            entries.append(ConfigEntry(name, None if known.sensitive else value, source, not known.dynamic,
                                       known.sensitive, known.type, known.doc, tuple(synonyms)))
        others = dict.fromkeys([*self._static_raw, *self._dynamic_default.raw, *self._dynamic_node.raw])
        for name in others:
            if name in broker_keys or (wanted is not None and name not in wanted):
                continue
            base = _base_key(name)
            config_type = base.type if base is not None else ConfigType.UNKNOWN
            sensitive = config_type in (ConfigType.PASSWORD, ConfigType.UNKNOWN)
            synonyms = [ConfigSynonym(name, None if sensitive else raw_layer[name], source)
                        for raw_layer, source in ((self._dynamic_node.raw, ConfigSource.DYNAMIC_BROKER_CONFIG),
                                                  (self._dynamic_default.raw,
                                                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                                                  (self._static_raw, ConfigSource.STATIC_BROKER_CONFIG))
                        if name in raw_layer]
            entries.append(ConfigEntry(name, synonyms[0].value, synonyms[0].source, True, sensitive, config_type,
                                       base.doc if base is not None else "", tuple(synonyms)))
        return entries

    def describe_topic(self, topic_overrides: Mapping[str, str] | None = None,
                       keys: Iterable[str] | None = None) -> list[ConfigEntry]:
        """A topic resource: every topic key (or those asked for), its override or the broker default."""
        from kafkalite.broker.config.entries import ConfigEntry, ConfigSynonym

        names = list(TOPIC_KEYS) if keys is None else [key for key in keys if key in TOPIC_KEYS]
        entries = []
        for name in names:
            known = TOPIC_KEYS[name]
            synonyms: list[ConfigSynonym] = []
            if topic_overrides and topic_overrides.get(name) is not None:
                synonyms.append(ConfigSynonym(name, known.format(known.parse(topic_overrides[name])),
                                              ConfigSource.TOPIC_CONFIG))
            for broker_key, _ in known.synonyms:
                synonyms.extend(self._broker_synonyms(broker_key))
            value = known.format(self.topic_config(name, topic_overrides))
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(ConfigEntry(name, value, source, False, known.sensitive, known.type, known.doc,
                                       tuple(synonyms)))
        return entries

    def _broker_synonyms(self, key: str) -> list[ConfigSynonym]:
        """The values a broker key has in each layer, highest precedence first."""
        from kafkalite.broker.config.entries import ConfigSynonym

        known = all_broker_keys()[key]
        found = []
        for layer, source in ((self._dynamic_node.values, ConfigSource.DYNAMIC_BROKER_CONFIG),
                              (self._dynamic_default.values, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self._values, ConfigSource.STATIC_BROKER_CONFIG)):
            if key in layer:
                found.append(ConfigSynonym(key, known.format(layer[key]), source))
        if key == "node.id" and "broker.id" in self._values and "node.id" not in self._values:
            found.append(ConfigSynonym("broker.id", known.format(self._values["broker.id"]),
                                       ConfigSource.STATIC_BROKER_CONFIG))
        if known.default is not None:
            found.append(ConfigSynonym(key, known.format(known.default), ConfigSource.DEFAULT_CONFIG))
        return found

    def __repr__(self) -> str:
        return f"BrokerConfig({self._static_raw!r})"


def _check_unique(listeners: list[Listener], key: str) -> None:
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key} names a listener twice: {', '.join(names)}")


def _advertised_host() -> str:
    """This machine's host name when it resolves, else localhost (for wildcard listeners)."""
    hostname = socket.gethostname()
    try:
        socket.getaddrinfo(hostname, None)
    except OSError:
        return "localhost"
    return hostname


class _DynamicLayer:
    """One level of dynamic broker configs: the strings as set, and the typed values of known keys.
    (Not a dataclass: it is mutable state, and a start need not generate one.)"""

    __slots__ = ("raw", "values")

    def __init__(self) -> None:
        self.raw: dict[str, str] = {}
        self.values: dict[str, Any] = {}


# Listener-prefixed keys Kafka still takes at the cluster level (the rest are per broker).
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})


def _base_key(name: str) -> ConfigKey | None:
    """The known key ``name`` is, or is for one listener (``listener.name.<l>.<key>``, or
    ``listener.name.<l>.<sasl mechanism>.<key>``); None for a key nobody knows."""
    known = find_broker_key(name)
    if known is not None:
        return known
    prefixed = listener_base_key(name)
    if prefixed is None:
        return None
    base = prefixed[1]
    return find_broker_key(base) or find_broker_key(base.partition(".")[2])


def _per_broker(name: str) -> bool:
    """Whether Kafka refuses the key as a cluster-wide default."""
    known = find_broker_key(name)
    if known is not None:
        return known.per_broker
    prefixed = listener_base_key(name)
    return prefixed is not None and prefixed[1] not in _CLUSTER_LEVEL_LISTENER_KEYS


def _refuse(names: list[str], message: str) -> None:
    """Kafka's refusal of a set of keys: ``<message>: Set(a, b)``."""
    if names:
        raise ConfigError(f"{message}: Set({', '.join(dict.fromkeys(names))})", ErrorCode.INVALID_REQUEST)
