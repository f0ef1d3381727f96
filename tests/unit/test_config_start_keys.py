"""The config table in two steps: a start builds only the start keys, and behaves as the whole table did.

Each check runs in a fresh interpreter, where nothing has built the whole table yet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.broker.config import BROKER_KEYS, CONFIG_KEYS, START_KEYS, TOPIC_KEYS

ROOT = Path(__file__).resolve().parents[2]


def fresh(script: str) -> str:
    """Run ``script`` in a new interpreter importing this checkout; its stdout and stderr."""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_the_start_keys_are_the_same_objects_in_the_same_order_as_the_whole_table() -> None:
    broker_keys = [key for key in CONFIG_KEYS if not key.per_topic]
    assert broker_keys[:len(START_KEYS)] == list(START_KEYS.values())
    assert all(BROKER_KEYS[name] is key for name, key in START_KEYS.items())
    assert [key for key in CONFIG_KEYS if key.per_topic] == list(TOPIC_KEYS.values())
    assert CONFIG_KEYS[-1].section == "Topic configs" and BROKER_KEYS["ssl.keystore.password"].sensitive


def test_a_start_from_start_keys_builds_no_more_of_the_table() -> None:
    out = fresh(
        "import sys\n"
        "from kafkalite.cli.serve import _parse_args, build_config\n"
        "config = build_config(_parse_args(['--port', '0', '--data-dir', 'data', 'log.retention.hours=5',\n"
        "                                   'num.partitions=3']))\n"
        "config.listeners(); config.topic_settings(); config.get_int('queued.max.requests')\n"
        "print('whole table:', 'kafkalite.broker.config.kafka_keys' in sys.modules)\n")
    assert "whole table: False" in out


@pytest.mark.parametrize(("pair", "message"), [
    ("remote.log.manager.thread.pool.size=0", "Value must be at least 1"),  # a key outside the start keys
    ("ssl.client.auth=sometimes", "String must be one of"),
    ("log.retention.hours=x", "Not a number of type INT"),  # a start key
])
def test_a_bad_value_fails_at_start_whichever_part_of_the_table_holds_its_key(pair: str, message: str) -> None:
    out = fresh(
        "from kafkalite.broker.config import ConfigError\n"
        "from kafkalite.cli.serve import _parse_args, build_config\n"
        "try:\n"
        f"    build_config(_parse_args(['--data-dir', 'data', {pair!r}]))\n"
        "except ConfigError as exc:\n"
        "    print('refused:', exc)\n")
    assert "refused:" in out and message in out


def test_an_unknown_key_still_warns_with_the_nearest_key_from_the_whole_table() -> None:
    out = fresh(
        "import logging, sys\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "from kafkalite.broker.config import BrokerConfig\n"
        "config = BrokerConfig({'ssl.keystore.locaton': '/keys', 'sasl.enabled.mechanisms': 'PLAIN'})\n"
        "print(config.get_list('sasl.enabled.mechanisms'))\n")
    assert "unknown config key ssl.keystore.locaton, kept without effect; did you mean ssl.keystore.location?" in out
    assert "['PLAIN']" in out
