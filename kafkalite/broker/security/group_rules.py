"""The ACL rules of the group and share-group APIs that name topics, as Kafka's KafkaApis has them.

* OffsetFetch (all versions) and DescribeShareGroupOffsets: DESCRIBE on each group; named topics
  without DESCRIBE answered TOPIC_AUTHORIZATION_FAILED on each partition; a group's offsets asked for
  all at once (null topics) filtered silently to the topics the principal may DESCRIBE;
* OffsetDelete (DELETE on the group), DescribeProducers (no group), AlterShareGroupOffsets (READ on
  the group) and DeleteShareGroupOffsets (DELETE on the group): READ on each topic, refused per
  partition (per topic where the answer has no partitions);
* ShareFetch and ShareAcknowledge: READ on the group, READ on each topic named by id (an unknown id
  is the handler's UNKNOWN_TOPIC_ID);
* ConsumerGroupHeartbeat and ShareGroupHeartbeat: READ on the group, and DESCRIBE on every subscribed
  topic name (TOPIC_AUTHORIZATION_FAILED otherwise, Kafka 4.0);
* ConsumerGroupDescribe and ShareGroupDescribe: DESCRIBE on each group; a group whose members use a
  topic the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without its members;
* GetTelemetrySubscriptions and PushTelemetry: no check (any client may, as in Kafka).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kafkalite.broker.handlers.registry import HandlerResult, RequestContext
from kafkalite.broker.security.acls import AclOperation, ResourceType
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.checks import (
    GROUP_FAILED,
    TOPIC_FAILED,
    Check,
    Inner,
    Rule,
    Topics,
    answer_later,
    element_type,
    error_answer,
    split_topics,
)

__all__ = ["describe_share_group_offsets", "group_describe", "group_heartbeat", "offset_fetch", "share_topics",
           "topics_in_list", "unchecked"]

_Op, _Type = AclOperation, ResourceType


def offset_fetch(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    """DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED); named topics without DESCRIBE answered
    TOPIC_AUTHORIZATION_FAILED per partition; all of a group's offsets (null topics) filtered silently."""
    check = Check(authorizer, context)

    def answer(topics: list[Any], asked: list[Any] | None, refused: list[Any], field_owner: Any) -> None:
        if asked is None:
            topics[:] = [topic for topic in topics if check(_Op.DESCRIBE, _Type.TOPIC, topic.name)]
            return
        topic_type = element_type(field_owner, "topics")
        partition_type = element_type(topic_type, "partitions")
        for topic in refused:
            topics.append(topic_type(name=topic.name, partitions=[
                partition_type(partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                               error_code=TOPIC_FAILED) for index in topic.partition_indexes]))

    if context.api_version < 8:
        if not check(_Op.DESCRIBE, _Type.GROUP, request.group_id):
            return error_answer(context, request, GROUP_FAILED)
        allowed, refused_topics = split_topics(check, _Op.DESCRIBE, request.topics)
        if refused_topics:
            request = copy.copy(request)
            request.topics = allowed
        asked = request.topics

        def patch_single(response: Any) -> None:
            if not response.error_code:
                answer(response.topics, asked, refused_topics, type(response))

        return answer_later(inner(context, request), patch_single)
    refused = [group for group in request.groups if not check(_Op.DESCRIBE, _Type.GROUP, group.group_id)]
    groups = [group for group in request.groups if group not in refused]
    refused_by_group: dict[str, tuple[list[Any] | None, list[Any]]] = {}
    for index, group in enumerate(groups):
        allowed, refused_topics = split_topics(check, _Op.DESCRIBE, group.topics)
        refused_by_group[group.group_id] = (group.topics, refused_topics)
        if refused_topics:
            groups[index] = group = copy.copy(group)
            group.topics = allowed
    if refused or any(refused_topics for _, refused_topics in refused_by_group.values()):
        request = copy.copy(request)
        request.groups = groups

    def patch(response: Any) -> None:
        group_type = element_type(type(response), "groups")
        for group in response.groups:
            asked, refused_topics = refused_by_group.get(group.group_id, ([], []))
            if not group.error_code:
                answer(group.topics, asked, refused_topics, group_type)
        for group in refused:
            response.groups.append(group_type(group_id=group.group_id, topics=[], error_code=GROUP_FAILED))

    return answer_later(inner(context, request), patch)


def topics_in_list(group: AclOperation | None, topic_operation: AclOperation, request_name: str,
                    response_topics: str, response_name: str,
                    partitions: Callable[[Any], list[int]] | None) -> Rule:
    """A rule for requests that name topics in ``request.topics``: with ``group``, the request's group
    needs that operation (its answer is GROUP_AUTHORIZATION_FAILED otherwise); topics without
    ``topic_operation`` are taken out and answered TOPIC_AUTHORIZATION_FAILED, on each partition
    ``partitions(topic)`` names, or on the topic when that is None. The added entries go in the answer
    only when it has no top-level error."""
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = Check(authorizer, context)
        if group is not None and not check(group, _Type.GROUP, request.group_id):
            return error_answer(context, request, GROUP_FAILED)
        allowed, refused = split_topics(check, topic_operation, request.topics,
                                        lambda topic: str(getattr(topic, request_name)))
        if not refused:
            return inner(context, request)
        request = copy.copy(request)
        request.topics = allowed
        topics = Topics(context)

        def patch(response: Any) -> None:
            if getattr(response, "error_code", 0):
                return
            topic_type = element_type(type(response), response_topics)
            names = {spec.name for spec in topic_type.FIELDS}
            for topic in refused:
                name = getattr(topic, request_name)
                values: dict[str, Any] = {response_name: name}
                if "topic_id" in names:
                    values["topic_id"] = topics.id_of(name)
                if partitions is None:
                    values["error_code"] = TOPIC_FAILED
                else:
                    partition_type = element_type(topic_type, "partitions")
                    values["partitions"] = [partition_type(partition_index=index, error_code=TOPIC_FAILED)
                                            for index in partitions(topic)]
                getattr(response, response_topics).append(topic_type(**values))

        return answer_later(inner(context, request), patch)
    return rule


def share_topics(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    """ShareFetch and ShareAcknowledge: READ on the group (the whole answer's
    GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED on its partitions, and
    on their acknowledgements). Topics are named by id: an id that names no topic is the handler's."""
    check = Check(authorizer, context)
    if not check(_Op.READ, _Type.GROUP, request.group_id):
        return error_answer(context, request, GROUP_FAILED)
    topics = Topics(context)
    refused = [topic for topic in request.topics
               if (name := topics.name_of(topic.topic_id)) and not check(_Op.READ, _Type.TOPIC, name)]
    if not refused:
        return inner(context, request)
    request = copy.copy(request)
    request.topics = [topic for topic in request.topics if topic not in refused]

    def patch(response: Any) -> None:
        if response.error_code:
            return
        topic_type = element_type(type(response), "responses")
        partition_type = element_type(topic_type, "partitions")
        acknowledging = any(spec.name == "acknowledge_error_code" for spec in partition_type.FIELDS)
        for topic in refused:
            entries = []
            for partition in topic.partitions:
                entry = partition_type(partition_index=partition.partition_index, error_code=TOPIC_FAILED)
                if acknowledging and partition.acknowledgement_batches:
                    entry.acknowledge_error_code = TOPIC_FAILED
                entries.append(entry)
            response.responses.append(topic_type(topic_id=topic.topic_id, partitions=entries))

    return answer_later(inner(context, request), patch)


def describe_share_group_offsets(authorizer: Authorizer, inner: Inner, context: RequestContext,
                                  request: Any) -> HandlerResult:
    """DescribeShareGroupOffsets, as OffsetFetch v8+: DESCRIBE on each group; named topics without
    DESCRIBE answered TOPIC_AUTHORIZATION_FAILED per partition; all of a group's topics filtered."""
    check = Check(authorizer, context)
    topics = Topics(context)
    refused = [group for group in request.groups if not check(_Op.DESCRIBE, _Type.GROUP, group.group_id)]
    groups = [group for group in request.groups if group not in refused]
    asked_by_group: dict[str, tuple[list[Any] | None, list[Any]]] = {}
    for index, group in enumerate(groups):
        allowed, refused_topics = split_topics(check, _Op.DESCRIBE, group.topics, lambda topic: topic.topic_name)
        asked_by_group[group.group_id] = (group.topics, refused_topics)
        if refused_topics:
            groups[index] = group = copy.copy(group)
            group.topics = allowed
    request = copy.copy(request)
    request.groups = groups

    def patch(response: Any) -> None:
        group_type = element_type(type(response), "groups")
        topic_type = element_type(group_type, "topics")
        partition_type = element_type(topic_type, "partitions")
        for group in response.groups:
            asked, refused_topics = asked_by_group.get(group.group_id, ([], []))
            if group.error_code:
                continue
            if asked is None:
                group.topics = [topic for topic in group.topics
                                if check(_Op.DESCRIBE, _Type.TOPIC, topic.topic_name)]
            for topic in refused_topics:
                group.topics.append(topic_type(topic_name=topic.topic_name, topic_id=topics.id_of(topic.topic_name),
                                               partitions=[partition_type(partition_index=index, start_offset=-1,
                                                                          leader_epoch=-1, lag=-1,
                                                                          error_code=TOPIC_FAILED)
                                                           for index in topic.partitions]))
        for group in refused:
            response.groups.append(group_type(group_id=group.group_id, topics=[], error_code=GROUP_FAILED))

    return answer_later(inner(context, request), patch)


def group_heartbeat(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    """ConsumerGroupHeartbeat and ShareGroupHeartbeat: READ on the group; subscribed topic names the
    principal may not DESCRIBE refuse the heartbeat with TOPIC_AUTHORIZATION_FAILED (Kafka 4.0)."""
    check = Check(authorizer, context)
    if not check(_Op.READ, _Type.GROUP, request.group_id):
        return error_answer(context, request, GROUP_FAILED)
    if any(not check(_Op.DESCRIBE, _Type.TOPIC, name) for name in request.subscribed_topic_names or ()):
        return error_answer(context, request, TOPIC_FAILED)
    return inner(context, request)


def _member_topics(group: Any) -> set[str]:
    """The topic names a described consumer or share group's members subscribe to or are assigned."""
    names: set[str] = set()
    for member in group.members:
        names.update(member.subscribed_topic_names or ())
        for assignment in (getattr(member, "assignment", None), getattr(member, "target_assignment", None)):
            if assignment is not None:
                names.update(item.topic_name for item in assignment.topic_partitions)
    return names


def group_describe(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    """ConsumerGroupDescribe and ShareGroupDescribe: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED
    for it); a group whose members use a topic the principal may not DESCRIBE is answered
    TOPIC_AUTHORIZATION_FAILED without its members (Kafka 4.0); authorized operations when asked."""
    check = Check(authorizer, context)
    refused = [group for group in request.group_ids if not check(_Op.DESCRIBE, _Type.GROUP, group)]
    if refused:
        request = copy.copy(request)
        request.group_ids = [group for group in request.group_ids if group not in refused]

    def patch(response: Any) -> None:
        group_type = element_type(type(response), "groups")
        answers = []
        for group in response.groups:
            if not group.error_code and any(not check(_Op.DESCRIBE, _Type.TOPIC, name)
                                            for name in _member_topics(group)):
                group = group_type(group_id=group.group_id, error_code=TOPIC_FAILED, members=[],
                                   error_message="The group uses topics the client may not describe.")
            elif not group.error_code and request.include_authorized_operations:
                group.authorized_operations = check.operations(_Type.GROUP, group.group_id)
            answers.append(group)
        answers += [group_type(group_id=group, error_code=GROUP_FAILED, error_message=None, members=[])
                    for group in refused]
        response.groups = answers

    return answer_later(inner(context, request), patch)


def unchecked(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    """GetTelemetrySubscriptions and PushTelemetry: any client may, as in Kafka."""
    return inner(context, request)
