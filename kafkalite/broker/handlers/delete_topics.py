"""DeleteTopics (API key 20), v0-6: delete topics by name, or (v6) by name or topic id.

Per topic, as Kafka's controller answers: an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an
unknown id UNKNOWN_TOPIC_ID; a name or id given twice, an entry with both or neither, and a
name that resolves to an id also given are INVALID_REQUEST. With ``delete.topic.enable=false``
every topic fails with TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, as Kafka does).
Errors carry a message from v5.

Deviation: Kafka lets an authorized client delete ``__consumer_offsets`` or
``__transaction_state``; here their partitions hold the coordinators' state, so internal topics
are refused with INVALID_TOPIC_EXCEPTION (the code Kafka uses to refuse DeleteRecords or
Produce on internal topics). Not implemented: ``timeout_ms`` (deletion is immediate) and quotas.
"""

from __future__ import annotations

import uuid
from collections import Counter

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from kafkalite.protocol.messages.delete_topics_response import DeletableTopicResult
from kafkalite.protocol.primitives import ZERO_UUID

__all__ = ["handle_delete_topics"]


@handles(api_key=20, min_version=0, max_version=6)
def handle_delete_topics(context: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    cluster = context.cluster
    version = context.api_version
    # (name, id) pairs: v0-5 send names only, v6 sends entries with a name or an id.
    entries: list[tuple[str | None, uuid.UUID]] = [(name, ZERO_UUID) for name in request.topic_names]
    entries += [(entry.name, entry.topic_id) for entry in request.topics]
    response = DeleteTopicsResponse()

    def answer(name: str | None, topic_id: uuid.UUID, error_code: ErrorCode, message: str | None = None) -> None:
        response.responses.append(DeletableTopicResult(name=name, topic_id=topic_id, error_code=error_code,
                                                       error_message=message))

    if not cluster.config.get_bool("delete.topic.enable"):
        code = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        for name, topic_id in entries:
            answer(name, topic_id, code, "Topic deletion is disabled.")
        return response

    name_counts = Counter(name for name, topic_id in entries if name is not None and topic_id == ZERO_UUID)
    id_counts = Counter(topic_id for name, topic_id in entries if name is None and topic_id != ZERO_UUID)
    reported: set[str | uuid.UUID] = set()
    to_delete: dict[uuid.UUID, str] = {}  # topic id -> name, in request order
    for name, topic_id in entries:
        if name is None and topic_id == ZERO_UUID:
            answer(None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
            continue
        if name is not None and topic_id != ZERO_UUID:
            answer(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
            continue
        key: str | uuid.UUID = name if name is not None else topic_id
        if key in reported:
            continue
        if (name_counts[name] if name is not None else id_counts[topic_id]) > 1:
            reported.add(key)
            what = "name" if name is not None else "id"
            answer(name, topic_id, ErrorCode.INVALID_REQUEST, f"Duplicate topic {what}.")
            continue
        topic = cluster.topics.get(name) if name is not None else cluster.topics.by_id(topic_id)
        if topic is None:
            if name is not None:
                answer(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       "This server does not host this topic-partition.")
            else:
                answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
            continue
        if topic.topic_id in to_delete:
            answer(topic.name, topic.topic_id, ErrorCode.INVALID_REQUEST,
                   "The provided topic name maps to an ID that was already supplied.")
            del to_delete[topic.topic_id]
            continue
        if topic.internal:
            answer(topic.name, topic.topic_id, ErrorCode.INVALID_TOPIC_EXCEPTION,
                   f"Internal topic {topic.name} holds coordinator state and cannot be deleted.")
            continue
        to_delete[topic.topic_id] = topic.name

    for topic_id, name in to_delete.items():
        try:
            cluster.topics.delete(name)
        except KafkaError as exc:
            answer(name, topic_id, exc.error_code, exc.message)
        else:
            answer(name, topic_id, ErrorCode.NONE)
    return response
