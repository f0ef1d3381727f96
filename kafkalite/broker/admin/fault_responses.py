"""Answers with an injected error, built from the request as Kafka would have answered it.

A Kafka error lives where the API keeps it: at the top of the response (JoinGroup, Heartbeat,
InitProducerId...), per partition (Produce, Fetch, ListOffsets, OffsetCommit...), per topic
(Metadata, CreateTopics), per group (DescribeGroups, OffsetFetch v8+) or per coordinator key
(FindCoordinator v4+). ``error_response`` builds the whole answer for a request with one error in
every such place. For the APIs whose requests name partitions (``PARTITIONED``, described by a
``Layout``: which fields hold the topics, their names and the partition indexes in the request and
the response), a fault can also take only some partitions: ``split_request`` takes them out of a
request that writes (so they are not written), ``fail_partitions`` puts them in the response with
the error (replacing what the handler answered for them, for requests that only read). Metadata
shows an unavailable leader as Kafka does during an election (``leader_unavailable_metadata``).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import RESPONSES

__all__ = ["PARTITIONED", "WRITES", "Layout", "TopicLookup", "error_response", "error_response_supported",
           "fail_partitions", "leader_unavailable_metadata", "request_partitions", "split_request"]

METADATA, FIND_COORDINATOR, OFFSET_FETCH, DESCRIBE_GROUPS, CREATE_TOPICS, DELETE_TOPICS, DELETE_GROUPS = (
    3, 10, 9, 15, 19, 20, 42)
ADD_PARTITIONS_TO_TXN = 24


class TopicLookup(Protocol):
    """What building an answer needs to know of the broker's topics."""

    def name_of(self, topic_id: uuid.UUID) -> str: ...

    def id_of(self, name: str) -> uuid.UUID: ...

    def partition_count(self, name: str) -> int: ...

    def names(self) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a partitioned API keeps its topics and partitions, in the request and in the response."""

    request_topics: str
    request_name: str
    request_partitions: str
    request_index: str | None  # None: the partitions are plain indexes
    response_topics: str
    response_name: str
    response_partitions: str
    response_index: str
    error_field: str = "error_code"
    topic_id_from: int | None = None  # from this version on, topics are named by id ("topic_id")
    versions: tuple[int, int] = (0, 1 << 15)


PARTITIONED: dict[int, Layout] = {
    0: Layout("topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses", "index"),
    1: Layout("topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index",
              topic_id_from=13),
    2: Layout("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"),
    8: Layout("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"),
    21: Layout("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"),
    23: Layout("topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition"),
    28: Layout("topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"),
}
# Partitioned requests that change state: a failed partition is taken out before the handler runs.
WRITES = frozenset({0, 8, 21, 28})
_TXN_V3 = Layout("v3_and_below_topics", "name", "partitions", None, "results_by_topic_v3_and_below", "name",
                 "results_by_partition", "partition_index", error_field="partition_error_code", versions=(0, 3))
# What a failed partition reports besides its error: nothing known (Kafka's -1s), no records.
_UNKNOWN = {"base_offset": -1, "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1, "offset": -1,
            "timestamp": -1, "leader_epoch": -1, "end_offset": -1, "low_watermark": -1, "committed_offset": -1,
            "log_append_time_ms": -1, "records": None}


def _valid_at(versions: str, version: int) -> bool:
    if versions == "none":
        return False
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


def _field_versions(cls: Any, name: str) -> str | None:
    return next((spec.versions for spec in cls.FIELDS if spec.name == name), None)


def _element_type(cls: Any, name: str) -> Any:
    """The struct class of an array-of-structs field."""
    struct = next(spec.struct for spec in cls.FIELDS if spec.name == name)
    assert struct is not None, f"{cls.__name__}.{name} is not an array of structs"
    return struct


def _layout(api_key: int, version: int) -> Layout | None:
    layout = _TXN_V3 if api_key == ADD_PARTITIONS_TO_TXN else PARTITIONED.get(api_key)
    if layout is None or not layout.versions[0] <= version <= layout.versions[1]:
        return None
    return layout


def _has_top_level_error(api_key: int, version: int | None = None) -> bool:
    versions = _field_versions(RESPONSES[api_key], "error_code")
    return versions is not None and (version is None or _valid_at(versions, version))


_SPECIAL = frozenset({METADATA, FIND_COORDINATOR, OFFSET_FETCH, DESCRIBE_GROUPS, CREATE_TOPICS, DELETE_TOPICS,
                      DELETE_GROUPS, ADD_PARTITIONS_TO_TXN})


def error_response_supported(api_key: int) -> bool:
    """Whether an error can be injected into this API's answers (at some version)."""
    return api_key in PARTITIONED or api_key in _SPECIAL or _has_top_level_error(api_key)


# which partitions a request names ------------------------------------------------------------------
def _topic_name(layout: Layout, entry: Any, version: int, topics: TopicLookup) -> str:
    if layout.topic_id_from is not None and version >= layout.topic_id_from:
        return topics.name_of(entry.topic_id)
    return str(getattr(entry, layout.request_name))


def _indexes(layout: Layout, entry: Any) -> list[int]:
    partitions = getattr(entry, layout.request_partitions)
    return list(partitions) if layout.request_index is None else [getattr(p, layout.request_index) for p in partitions]


def request_partitions(api_key: int, version: int, request: Any, topics: TopicLookup) -> list[tuple[str, int]] | None:
    """The (topic, partition) pairs a request names; None for an API whose requests name none.
    A Metadata request names every partition of the topics it asks about (all of them when it asks
    for all)."""
    if api_key == METADATA:
        requested = request.topics
        if requested is None or (version == 0 and not requested):
            names = topics.names()
        else:
            names = [entry.name if entry.name is not None else topics.name_of(entry.topic_id) for entry in requested]
        return [(name, index) for name in names for index in range(topics.partition_count(name))]
    layout = _layout(api_key, version)
    if layout is None:
        return None
    return [(_topic_name(layout, entry, version, topics), index)
            for entry in getattr(request, layout.request_topics) for index in _indexes(layout, entry)]


# whole answers ---------------------------------------------------------------------------------
def error_response(api_key: int, version: int, request: Any, error: ErrorCode, topics: TopicLookup) -> Message | None:
    """The answer to ``request`` with ``error`` wherever the API keeps errors; None when this version
    of the API has no place for one."""
    response_type = RESPONSES[api_key]
    layout = _layout(api_key, version)
    if layout is not None:
        response = response_type()
        requested = [(_topic_name(layout, entry, version, topics), _indexes(layout, entry))
                     for entry in getattr(request, layout.request_topics)]
        for name, indexes in requested:
            _add_partitions(layout, response, version, name, indexes, error, topics)
        return response
    special: Message | None = _special_response(api_key, version, request, error, topics)
    if special is not None:
        return special
    if _has_top_level_error(api_key, version):
        response = response_type()
        response.error_code = error  # type: ignore[attr-defined]  # the field exists at this version
        return response
    return None


def _named(api_key: int, field: str, key: str, names: Iterable[Any], error: ErrorCode, **more: Any) -> Any:
    response: Any = RESPONSES[api_key]()
    element = _element_type(type(response), field)
    setattr(response, field, [element(**{key: name, "error_code": error, **more}) for name in names])
    return response


def _special_response(api_key: int, version: int, request: Any, error: ErrorCode,
                      topics: TopicLookup) -> Any:
    response: Any
    if api_key == METADATA:
        response = RESPONSES[api_key]()
        requested = request.topics
        if requested is None or (version == 0 and not requested):
            names: list[str] = topics.names()
        else:
            names = [entry.name if entry.name is not None else topics.name_of(entry.topic_id) for entry in requested]
        element = _element_type(type(response), "topics")
        response.topics = [element(name=name, error_code=error) for name in names]
        return response
    if api_key == FIND_COORDINATOR:
        if version >= 4:
            return _named(api_key, "coordinators", "key", request.coordinator_keys, error, node_id=-1, host="",
                          port=-1)
        response = RESPONSES[api_key]()
        response.error_code, response.node_id, response.host, response.port = error, -1, "", -1
        return response
    if api_key == OFFSET_FETCH:
        if version >= 8:
            return _named(api_key, "groups", "group_id", [group.group_id for group in request.groups], error)
        if version < 2:
            return None
        response = RESPONSES[api_key]()
        response.error_code = error
        return response
    if api_key == DESCRIBE_GROUPS:
        return _named(api_key, "groups", "group_id", request.groups, error)
    if api_key == DELETE_GROUPS:
        return _named(api_key, "results", "group_id", request.groups_names, error)
    if api_key == CREATE_TOPICS:
        return _named(api_key, "topics", "name", [topic.name for topic in request.topics], error)
    if api_key == DELETE_TOPICS:
        names = request.topic_names if version < 6 else [topic.name for topic in request.topics]
        return _named(api_key, "responses", "name", names, error)
    return None


# some partitions ---------------------------------------------------------------------------------
def split_request(api_key: int, version: int, request: Any, failing: frozenset[tuple[str, int]],
                  topics: TopicLookup) -> Any:
    """A copy of ``request`` without the ``failing`` partitions (the original is left as it is)."""
    layout = _layout(api_key, version)
    assert layout is not None, f"API {api_key} v{version} names no partitions"
    kept_topics = []
    for entry in getattr(request, layout.request_topics):
        name = _topic_name(layout, entry, version, topics)
        partitions = getattr(entry, layout.request_partitions)
        kept = [p for p in partitions
                if (name, p if layout.request_index is None else getattr(p, layout.request_index)) not in failing]
        if len(kept) == len(partitions):
            kept_topics.append(entry)
        elif kept:
            entry = copy.copy(entry)
            setattr(entry, layout.request_partitions, kept)
            kept_topics.append(entry)
    request = copy.copy(request)
    setattr(request, layout.request_topics, kept_topics)
    return request


def fail_partitions(api_key: int, version: int, request: Any, response: Message, failing: frozenset[tuple[str, int]],
                    error: ErrorCode, topics: TopicLookup) -> None:
    """Answer the ``failing`` partitions that ``request`` names with ``error`` in ``response``:
    what the handler answered for them is replaced, those it did not answer are added."""
    layout = _layout(api_key, version)
    assert layout is not None, f"API {api_key} v{version} names no partitions"
    for entry in getattr(request, layout.request_topics):
        name = _topic_name(layout, entry, version, topics)
        indexes = [index for index in _indexes(layout, entry) if (name, index) in failing]
        if indexes:
            _add_partitions(layout, response, version, name, indexes, error, topics)


def _add_partitions(layout: Layout, response: Any, version: int, name: str, indexes: list[int],
                    error: ErrorCode, topics: TopicLookup) -> None:
    by_id = layout.topic_id_from is not None and version >= layout.topic_id_from
    topic_entries = getattr(response, layout.response_topics)
    topic_entry = None
    for candidate in topic_entries:
        if (topics.name_of(candidate.topic_id) if by_id else getattr(candidate, layout.response_name)) == name:
            topic_entry = candidate
            break
    if topic_entry is None:
        topic_entry = _element_type(type(response), layout.response_topics)()
        if by_id:
            topic_entry.topic_id = topics.id_of(name)
        else:
            setattr(topic_entry, layout.response_name, name)
        topic_entries.append(topic_entry)
    partition_type = _element_type(type(topic_entry), layout.response_partitions)
    partitions = getattr(topic_entry, layout.response_partitions)
    existing = {getattr(partition, layout.response_index): partition for partition in partitions}
    for index in indexes:
        partition = existing.get(index)
        if partition is None:
            partition = partition_type()
            setattr(partition, layout.response_index, index)
            partitions.append(partition)
        setattr(partition, layout.error_field, error)
        for field, value in _UNKNOWN.items():
            if hasattr(partition, field):
                setattr(partition, field, value)


def leader_unavailable_metadata(response: Any, failing: frozenset[tuple[str, int]],
                                error: ErrorCode = ErrorCode.LEADER_NOT_AVAILABLE) -> None:
    """Show the ``failing`` partitions of a Metadata answer without a leader (or with ``error``)."""
    for topic in response.topics:
        for partition in topic.partitions:
            if (topic.name, partition.partition_index) in failing:
                partition.error_code = error
                if error == ErrorCode.LEADER_NOT_AVAILABLE:
                    partition.leader_id, partition.leader_epoch = -1, -1
                    partition.isr_nodes = []
