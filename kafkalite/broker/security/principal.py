"""Principals, and the mapping of a client certificate's distinguished name to one.

A principal is Kafka's ``User:<name>``. A connection that did not authenticate (PLAINTEXT, SSL
without a client certificate) is ``User:ANONYMOUS``. On an SSL listener with ``ssl.client.auth``
``required`` or ``requested``, a client that presents a certificate is the user its subject's
distinguished name maps to by ``ssl.principal.mapping.rules``, with Kafka's rule syntax::

    RULE:<pattern>/<replacement>/[LU], RULE:..., DEFAULT

The name is written as Java's ``X500Principal.getName()`` writes it (RFC 2253: the last RDN
first, ``CN=client,OU=dev,O=example``). The rules are tried in order; the first whose pattern
matches the whole name gives ``replacement`` (``$1`` for a group), lower-cased with ``/L`` and
upper-cased with ``/U``. ``DEFAULT`` gives the name as it is. No matching rule fails the connection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ANONYMOUS", "KafkaPrincipal", "NoMatchingRule", "SslPrincipalMapper", "distinguished_name"]


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """``User:alice``: a principal type and a name."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls("User", name)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        principal_type, colon, name = text.partition(":")
        if not colon or not principal_type:
            raise ValueError(f"{text!r} is not a principal (expected Type:name, for example User:alice)")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal.user("ANONYMOUS")

# The attribute names Java writes in a distinguished name (the others are written as their OID).
_ATTRIBUTE_NAMES = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET", "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def distinguished_name(peer_certificate: dict[str, Any]) -> str:
    """The subject of ``ssl.SSLSocket.getpeercert()``'s answer, written as RFC 2253 (last RDN first)."""
    rdns = []
    for rdn in peer_certificate.get("subject", ()):
        rdns.append("+".join(f"{_ATTRIBUTE_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn))
    return ",".join(reversed(rdns))


class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` matched the distinguished name."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = re.sub(r"\$(\d)", lambda group: match.group(int(group.group(1))) or "", self.replacement)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: a distinguished name -> a user name (see the module docstring)."""

    def __init__(self, rules: Sequence[_Rule]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def parse(cls, text: str) -> SslPrincipalMapper:
        """Rules as Kafka writes them; ValueError with the part that is not a rule."""
        rules: list[_Rule] = []
        position, text = 0, text.strip() or "DEFAULT"
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise ValueError(f"ssl.principal.mapping.rules: cannot read a rule at {text[position:]!r}")
            if match.group(1):
                rules.append(_Rule(None, "", ""))
            else:
                pattern = match.group(2).replace("\\/", "/")
                rules.append(_Rule(re.compile(pattern), match.group(3).replace("\\/", "/"), match.group(4)))
            position = match.end()
        return cls(rules)

    def name(self, distinguished: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(distinguished)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules matches {distinguished!r}")
