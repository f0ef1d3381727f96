"""``kafkalite serve --security PROTOCOL[:MECHANISM]``: a secured development broker in one line.

::

    kafkalite serve --security SASL_SSL:SCRAM-SHA-256 --data-dir ./data

The spelling is the test fixture's (``EmbeddedBroker(security=...)``, ``kafkalite.testing.security``):
``SSL`` (TLS, a client certificate required: ``CN=<user>`` is ``User:<user>``), or ``SASL_PLAINTEXT``
or ``SASL_SSL`` with ``PLAIN`` (the default), ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``
(unsecured tokens). The broker gets one listener of that protocol on 127.0.0.1 (``--port``, default
9092) and the users ``admin`` (in ``super.users``), ``alice`` and ``bob``, password ``<user>-secret``
(SCRAM credentials are stored as the broker starts). TLS uses a development CA, broker and client
certificates, made in ``<data dir>/dev-certificates`` (and found there again, so clients keep trusting
the broker across restarts) or, without a data directory (``--memory``), in a temporary directory
removed at exit. Once the broker serves, the ready client configs of ``alice`` are printed for
confluent-kafka, kafka-python and the bundled client. ACLs stay off unless ``authorizer.class.name``
is set as well.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from kafkalite.testing.security import PASSWORDS, TestSecurity

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer

__all__ = ["SecuredServe"]

HOST = "127.0.0.1"
DEFAULT_PORT = 9092
CERTIFICATES_DIRECTORY = "dev-certificates"


class SecuredServe:
    """The keys, certificates and users of ``--security`` for one run of ``kafkalite serve``."""

    def __init__(self, text: str, data_dir: Path | None, out: TextIO = sys.stdout) -> None:
        self.text = text.upper()
        self.security = TestSecurity.parse(text, None if data_dir is None else data_dir / CERTIFICATES_DIRECTORY)
        self.out = out

    def broker_overrides(self, port: int | None) -> dict[str, str]:
        """The broker keys of the secured listener (it replaces ``listeners`` and ``advertised.listeners``)."""
        configs = self.security.broker_configs(HOST, DEFAULT_PORT if port is None else port)
        configs["advertised.listeners"] = configs["listeners"]
        return configs

    def on_started(self, server: BrokerServer) -> None:
        """Store the users' SCRAM credentials, then print the client configs."""
        if self.security.scram and server.cluster is not None:
            self.security.store_scram_credentials(server.cluster.scram_credentials)
        bootstrap = f"{HOST}:{server.bound[0].port}"
        users = ", ".join(f"{user} ({password})" for user, password in PASSWORDS.items())
        lines = [f"kafkalite: {self.text} on {bootstrap}; users {users}; admin is a super user"]
        if self.security.certificates is not None:
            lines.append(f"kafkalite: clients trust the CA in {self.security.certificates.ca}")
        lines += [f"confluent-kafka: {_literal(self.security.confluent_config(bootstrap, 'alice'))}",
                  f"kafka-python: {_literal(_printable(self.security.kafka_python_config(bootstrap, 'alice')))}",
                  f"bundled client: {_literal(self.security.client_config(bootstrap, 'alice'))}"]
        print("\n".join(lines), file=self.out, flush=True)

    def close(self) -> None:
        self.security.close()


def _printable(config: dict[str, Any]) -> dict[str, Any]:
    """kafka-python's keyword arguments as text: an OAUTHBEARER token provider is an object."""
    if "sasl_oauth_token_provider" in config:
        config = {**config, "sasl_oauth_token_provider": "an AbstractTokenProvider giving an unsecured JWS"}
    return config


def _literal(config: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{key!r}: {value!r}" for key, value in config.items()) + "}"
