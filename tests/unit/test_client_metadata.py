"""The client's cluster metadata: installing answers, leader epochs, and when to ask again."""

from __future__ import annotations

import uuid

from kafkalite.client.metadata import ClusterMetadata, TopicPartition, is_stale_metadata_error
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import MetadataResponse
from kafkalite.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

TOPIC_ID = uuid.uuid4()


def response(leader: int, epoch: int, topic_id: uuid.UUID = TOPIC_ID, error: int = 0) -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponseBroker(1, "a", 1), MetadataResponseBroker(2, "b", 2)], cluster_id="c", controller_id=1,
        topics=[MetadataResponseTopic(error_code=error, name="t", topic_id=topic_id, partitions=[] if error else [
            MetadataResponsePartition(partition_index=1, leader_id=leader, leader_epoch=epoch),
            MetadataResponsePartition(partition_index=0, leader_id=2, leader_epoch=0)])])


def test_an_answer_is_installed() -> None:
    metadata = ClusterMetadata()
    metadata.update(response(leader=1, epoch=3), 0, ["t"])
    assert metadata.partition_count("t") == 2 and sorted(metadata.brokers) == [1, 2]
    assert metadata.leader_for(TopicPartition("t", 1)) == 1 and metadata.leader_epoch(TopicPartition("t", 1)) == 3
    assert metadata.available_partitions("t") == [0, 1]
    assert metadata.leader_for(TopicPartition("other", 0)) is None


def test_an_older_answer_does_not_move_a_leader_back() -> None:
    metadata = ClusterMetadata()
    metadata.update(response(leader=1, epoch=3), 0, ["t"])
    metadata.update(response(leader=2, epoch=2), 1, ["t"])
    assert metadata.leader_for(TopicPartition("t", 1)) == 1
    metadata.update(response(leader=2, epoch=4), 2, ["t"])
    assert metadata.leader_for(TopicPartition("t", 1)) == 2
    metadata.update(response(leader=1, epoch=0, topic_id=uuid.uuid4()), 3, ["t"])  # the topic was recreated
    assert metadata.leader_for(TopicPartition("t", 1)) == 1


def test_a_missing_topic_has_no_partitions() -> None:
    metadata = ClusterMetadata()
    metadata.update(response(1, 0, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), 0, ["t"])
    assert metadata.partition_count("t") is None
    assert metadata.topic_error("t") is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_refresh_timing() -> None:
    metadata = ClusterMetadata(metadata_max_age_ms=1000, retry_backoff_ms=100)
    assert metadata.time_to_next_update(0) == 0  # nothing known yet
    metadata.update(response(1, 0), 0, ["t"])
    assert metadata.time_to_next_update(400) == 600
    metadata.request_update()
    assert metadata.time_to_next_update(50) == 50  # at once, but not within retry.backoff.ms
    assert metadata.time_to_next_update(150) == 0
    metadata.failed(200)
    assert metadata.time_to_next_update(250) == 50
    assert metadata.add_topics(["u"]) and not metadata.add_topics(["u"])


def test_stale_metadata_errors() -> None:
    assert all(is_stale_metadata_error(code) for code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE))
    assert not is_stale_metadata_error(ErrorCode.MESSAGE_TOO_LARGE)
