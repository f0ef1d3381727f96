"""The rows of a DescribeConfigs answer: ``ConfigEntry`` and its ``ConfigSynonym`` sources.

Apart from ``broker_config`` so that a start, which describes nothing, does not build them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.broker.config.keys import ConfigSource, ConfigType

__all__ = ["ConfigEntry", "ConfigSynonym"]


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A lower-precedence source of the same setting (DescribeConfigs v1+ ``synonyms``)."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None  # None when unset or sensitive
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    documentation: str = ""
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG
