"""A listener's view of the broker config: ``listener.name.<listener>.<key>`` before ``<key>``.

Kafka lets every security key be set for one listener under its prefix (the listener name in lower
case: ``listener.name.sasl_ssl.ssl.keystore.location``); an unprefixed key applies to every listener
that has no prefixed one. A dynamic value (AlterConfigs) comes before a static one. Values of known
keys are parsed with the key's type.
"""

from __future__ import annotations

from typing import Any

from kafkalite.broker.config import BROKER_KEYS, BrokerConfig

__all__ = ["ListenerSettings"]


class ListenerSettings:
    """The security settings of one listener."""

    def __init__(self, config: BrokerConfig, listener_name: str) -> None:
        self.config = config
        self.listener_name = listener_name
        self.prefix = f"listener.name.{listener_name.lower()}."

    def get(self, key: str) -> Any:
        """The listener's value of ``key`` (the prefixed one, else the broker's; None when unset)."""
        config = self.config
        known = BROKER_KEYS.get(key)
        prefixed = self.prefix + key
        if config.is_set(prefixed):
            raw = self._prefixed(prefixed)
            return known.parse(raw) if known is not None and isinstance(raw, str) else raw
        if known is not None:
            return config.get(key)
        return config.get(key) if config.is_set(key) else None

    def _prefixed(self, key: str) -> Any:
        """A prefixed key's value: set dynamically (this node, then the cluster-wide default), else statically."""
        for layer in (self.config.dynamic_configs(False), self.config.dynamic_configs(True)):
            if key in layer:
                return layer[key]
        return self.config.get(key)

    def get_str(self, key: str) -> str | None:
        value = self.get(key)
        if value is None:
            return None
        return ",".join(value) if isinstance(value, list) else str(value)

    def get_list(self, key: str) -> list[str]:
        value = self.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return [str(item) for item in value]
