"""Reading JAAS login settings (``sasl.jaas.config``) as Kafka writes them.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

One or more entries, each a login module class, a control flag and ``name=value`` options (values
quoted or bare), ended by ``;``. The broker reads the PLAIN users from the ``user_<name>="<password>"``
options of ``PlainLoginModule`` and the OAUTHBEARER options of ``OAuthBearerLoginModule``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasEntry", "parse_jaas"]

_TOKEN = re.compile(r'\s*(?:"((?:\\.|[^"\\])*)"|([^\s=;"]+)|(=)|(;))')


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"sasl.jaas.config: cannot read {text[position:position + 20]!r}")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            tokens.append(("word", word))
        elif equals is not None:
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
        position = match.end()
    return tokens


def parse_jaas(text: str) -> list[JaasEntry]:
    """The entries of a JAAS config; ValueError when it is not one."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    index = 0
    while index < len(tokens):
        if index + 1 >= len(tokens) or tokens[index][0] != "word" or tokens[index + 1][0] != "word":
            raise ValueError("sasl.jaas.config: expected '<LoginModule class> "
                             "<required|requisite|sufficient|optional>'")
        module, flag = tokens[index][1], tokens[index + 1][1]
        index += 2
        options: dict[str, str] = {}
        while index < len(tokens) and tokens[index][0] != ";":
            if index + 2 >= len(tokens) or tokens[index + 1][0] != "=" or tokens[index + 2][0] not in ("value", "word"):
                raise ValueError(f"sasl.jaas.config: expected name=\"value\" after {module}")
            options[tokens[index][1]] = tokens[index + 2][1]
            index += 3
        if index >= len(tokens):
            raise ValueError("sasl.jaas.config: an entry must end with ';'")
        index += 1
        entries.append(JaasEntry(module, flag, options))
    return entries
