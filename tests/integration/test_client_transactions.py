"""Transactions with the bundled producer: fencing, wrong states and offsets committed in a transaction."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalite.client import (
    NewTopic,
    ProducerFencedError,
    TopicPartition,
    TransactionStateError,
)
from kafkalite.client import sync as blocking

TIMEOUT_S = 30


def test_a_second_instance_fences_the_first(broker: Any) -> None:
    transactional_id = f"fence-{uuid.uuid4().hex[:8]}"
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    with blocking.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])[topic].raise_for_error()
    old = blocking.Producer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id, max_block_ms=5000)
    old.init_transactions()
    old.begin_transaction()
    old.send(topic, b"from the old instance").result(TIMEOUT_S)
    with blocking.Producer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id) as new:
        new.init_transactions()  # aborts the old instance's open transaction and bumps the epoch
        with pytest.raises(ProducerFencedError):
            old.send(topic, b"too late").result(TIMEOUT_S)
            old.commit_transaction()
        with pytest.raises((ProducerFencedError, TransactionStateError)):
            old.commit_transaction()
        new.begin_transaction()
        new.send(topic, b"from the new instance")
        new.commit_transaction()
    old.close(0)


def test_calls_in_the_wrong_state_are_refused(broker: Any) -> None:
    with blocking.Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"state-{uuid.uuid4().hex[:8]}") as p:
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.begin_transaction()  # before init_transactions
        p.init_transactions()
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.send("tx-state", b"outside a transaction").result(TIMEOUT_S)
        with pytest.raises(TransactionStateError):
            p.commit_transaction()
    with blocking.Producer(bootstrap_servers=broker.bootstrap) as plain:
        with pytest.raises(TransactionStateError, match="transactional.id"):
            plain.init_transactions()


def test_offsets_sent_to_a_transaction_commit_with_it(broker: Any) -> None:
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    group = f"tx-group-{uuid.uuid4().hex[:8]}"
    partition = TopicPartition(topic, 0)
    with blocking.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])[topic].raise_for_error()
        with blocking.Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"eos-{uuid.uuid4().hex[:8]}"
                               ) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"output", partition=0)
            producer.send_offsets_to_transaction({partition: 42}, group)
            assert admin.list_consumer_group_offsets(group) == {}  # staged, not visible before the commit
            producer.commit_transaction()
            assert admin.list_consumer_group_offsets(group)[partition].offset == 42
            producer.begin_transaction()
            producer.send_offsets_to_transaction({partition: 99}, group)
            producer.abort_transaction()
            assert admin.list_consumer_group_offsets(group)[partition].offset == 42
