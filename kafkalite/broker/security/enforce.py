"""Authorization of every API: the handler registry, each handler wrapped in Kafka's ACL checks.

With an authorizer (``authorizer.class.name``), ``authorizing_handlers`` gives the connections a copy
of ``HANDLERS`` whose handlers check the request's principal (``context.session``) before and after
the real handler runs, with Kafka's resource and operation for each API (KafkaApis, and the
"Authorization and ACLs" table of Kafka's documentation). What is refused is answered where the API
keeps its errors, and not handed to the handler:

* partitions (Produce, Fetch, ListOffsets, OffsetCommit, DeleteRecords, OffsetForLeaderEpoch,
  TxnOffsetCommit): the partitions of topics without the operation are taken out of the request and
  answered TOPIC_AUTHORIZATION_FAILED; a transactional id or group the request needs and may not use
  fails every partition (TRANSACTIONAL_ID_/GROUP_AUTHORIZATION_FAILED); a Fetch v13+ topic id that
  names no topic is left to the handler (UNKNOWN_TOPIC_ID);
* Metadata: topics without DESCRIBE are left out of an all-topics answer and answered
  TOPIC_AUTHORIZATION_FAILED when named (also when they do not exist and may not be created);
  authorized operations are filled when asked for;
* groups, transactional ids, topics named in lists (DescribeGroups, DeleteGroups, CreateTopics,
  CreatePartitions, DescribeConfigs, AlterConfigs, DescribeTransactions, FindCoordinator v4+...):
  each refused name gets its own error entry;
* DeleteTopics: DELETE on the cluster or on each topic, a topic given by id (v6+) resolved first
  (see ``_delete_topics``);
* the group and share-group APIs that name topics (OffsetFetch, OffsetDelete, DescribeProducers, the
  share-group APIs, the KIP-848 heartbeat and describe): ``group_rules``;
* top-level errors (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, InitProducerId, EndTxn, the ACL and
  SCRAM APIs, the cluster APIs): the whole answer carries the error.

ListGroups and ListTransactions list only what the principal may DESCRIBE. ApiVersions, SaslHandshake
and SaslAuthenticate are not checked. An API without a rule of its own needs READ on its group when
the request names one, else DESCRIBE on the cluster.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalite.broker.admin.fault_responses import fail_partitions, request_partitions, split_request
from kafkalite.broker.handlers.registry import ApiHandler, HandlerResult, RequestContext
from kafkalite.broker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.checks import (
    CLUSTER_FAILED,
    GROUP_FAILED,
    TOPIC_FAILED,
    TXN_FAILED,
    Check,
    Inner,
    Rule,
    Topics,
    answer_later,
    entry,
    error_answer,
)
from kafkalite.broker.security.group_rules import (
    describe_share_group_offsets,
    group_describe,
    group_heartbeat,
    offset_fetch,
    share_topics,
    topics_in_list,
    unchecked,
)
from kafkalite.protocol.errors import ErrorCode

__all__ = ["authorizing_handlers"]

_Op, _Type = AclOperation, ResourceType
_UNCHECKED = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate


# partitioned APIs ------------------------------------------------------------------------------
def _partitioned(topic_operation: AclOperation, *, transactional: bool = False, group: bool = False,
                 replica_fetch: bool = False) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = Check(authorizer, context)
        if transactional and getattr(request, "transactional_id", None) \
                and not check(_Op.WRITE, _Type.TRANSACTIONAL_ID, request.transactional_id):
            return error_answer(context, request, TXN_FAILED)
        if group and not check(_Op.READ, _Type.GROUP, request.group_id):
            return error_answer(context, request, GROUP_FAILED)
        if replica_fetch and max(getattr(request, "replica_id", -1), _replica_state_id(request)) >= 0:
            return inner(context, request) if check(_Op.CLUSTER_ACTION, _Type.CLUSTER) else \
                error_answer(context, request, CLUSTER_FAILED)
        topics = Topics(context)
        partitions = request_partitions(context.api_key, context.api_version, request, topics) or []
        # Fetch v13+ names topics by id: an id that names no topic is the handler's UNKNOWN_TOPIC_ID
        by_id = context.api_key == 1 and context.api_version >= 13
        refused_topics = {name for name in {name for name, _ in partitions}
                          if not (by_id and not name) and not check(topic_operation, _Type.TOPIC, name)}
        if not refused_topics:
            return inner(context, request)
        failing = frozenset(item for item in partitions if item[0] in refused_topics)
        allowed = split_request(context.api_key, context.api_version, request, failing, topics)
        return answer_later(inner(context, allowed), lambda response: fail_partitions(
            context.api_key, context.api_version, request, response, failing, TOPIC_FAILED, topics))
    return rule


def _replica_state_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    return -1 if state is None else int(getattr(state, "replica_id", -1))


# Metadata ------------------------------------------------------------------------------------
def _metadata(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = Check(authorizer, context)
    topics = Topics(context)
    refused: list[Any] = []
    if request.topics:
        may_create = check(_Op.CREATE, _Type.CLUSTER)
        kept = []
        for entry in request.topics:
            name = entry.name if entry.name is not None else topics.name_of(entry.topic_id)
            if not name or not check(_Op.DESCRIBE, _Type.TOPIC, name):
                refused.append(entry)
            elif request.allow_auto_topic_creation and not topics.exists(name) and not may_create \
                    and not check(_Op.CREATE, _Type.TOPIC, name):
                refused.append(entry)
            else:
                kept.append(entry)
        if refused:
            request = copy.copy(request)
            request.topics = kept

    def patch(response: Any) -> None:
        if request.topics is None or (context.api_version == 0 and not request.topics and not refused):
            response.topics = [topic for topic in response.topics if check(_Op.DESCRIBE, _Type.TOPIC, topic.name)]
        if refused:
            element = type(response).FIELDS[[spec.name for spec in type(response).FIELDS].index("topics")].struct
            for entry in refused:
                response.topics.append(element(name=entry.name, topic_id=entry.topic_id, error_code=TOPIC_FAILED,
                                               partitions=[]))
        if getattr(request, "include_topic_authorized_operations", False):
            for topic in response.topics:
                if topic.error_code != TOPIC_FAILED:
                    topic.topic_authorized_operations = check.operations(_Type.TOPIC, topic.name)
        if getattr(request, "include_cluster_authorized_operations", False):
            response.cluster_authorized_operations = check.operations(_Type.CLUSTER)

    return answer_later(inner(context, request), patch)


# requests that name resources in a list ----------------------------------------------------------
def _named(names_of: Callable[[Any, int], list[Any]], keep: Callable[[Any, Any, list[Any], int], None],
           answers_of: Callable[[Any], list[Any]], refuse: Callable[[Any, Any, int], Any],
           allowed: Callable[[Check, Any], bool],
           operations: Callable[[Check, Any, Any], None] | None = None
           ) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    """A rule for requests naming resources in a list: the refused items are taken out of the request
    and answered with ``refuse(response, item, version)`` (an error entry)."""
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = Check(authorizer, context)
        items = names_of(request, context.api_version)
        refused = [item for item in items if not allowed(check, item)]
        if refused:
            request = copy.copy(request)
            keep(request, [item for item in items if item not in refused], refused, context.api_version)

        def patch(response: Any) -> None:
            answers = answers_of(response)
            for item in refused:
                answers.append(refuse(response, item, context.api_version))
            if operations is not None:
                operations(check, request, response)

        return answer_later(inner(context, request), patch)
    return rule


def _group_operations(field: str) -> Callable[[Check, Any, Any], None]:
    def fill(check: Check, request: Any, response: Any) -> None:
        if getattr(request, "include_authorized_operations", False):
            for group in getattr(response, field):
                if group.error_code != GROUP_FAILED:
                    group.authorized_operations = check.operations(_Type.GROUP, group.group_id)
    return fill


def _set(field: str) -> Callable[[Any, Any, list[Any], int], None]:
    def keep(request: Any, kept: list[Any], refused: list[Any], version: int) -> None:
        setattr(request, field, kept)
    return keep


def _topic_name(item: Any) -> str:
    return item if isinstance(item, str) else item.name


_CONFIG_RESOURCES = {2: (_Type.TOPIC, TOPIC_FAILED), 32: (_Type.GROUP, GROUP_FAILED)}  # else the cluster


def _config_allowed(operation: AclOperation) -> Callable[[Check, Any], bool]:
    def allowed(check: Check, resource: Any) -> bool:
        resource_type, _ = _CONFIG_RESOURCES.get(resource.resource_type, (_Type.CLUSTER, CLUSTER_FAILED))
        name = resource.resource_name if resource_type != _Type.CLUSTER else CLUSTER_NAME
        return check(operation, resource_type, name)
    return allowed


def _config_refused(field: str) -> Callable[[Any, Any, int], Any]:
    def refuse(response: Any, resource: Any, version: int) -> Any:
        _, error = _CONFIG_RESOURCES.get(resource.resource_type, (_Type.CLUSTER, CLUSTER_FAILED))
        values: dict[str, Any] = {"error_code": error, "error_message": None, "resource_type": resource.resource_type,
                                  "resource_name": resource.resource_name}
        if field == "results":
            values["configs"] = []
        return entry(response, field, **values)
    return refuse


def _delete_topics(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    """DeleteTopics as Kafka's controller authorizes it: DELETE on the cluster allows every topic; else a
    topic needs DELETE, and one the principal may not even DESCRIBE is refused without saying whether
    it exists. A topic given by id (v6+) is resolved first: an unknown id stays the handler's
    UNKNOWN_TOPIC_ID; a refused one is answered with its name only when the principal may DESCRIBE it.
    Entries the handler refuses as invalid (duplicates, both or neither of name and id) are left to it."""
    check = Check(authorizer, context)
    if check(_Op.DELETE, _Type.CLUSTER):
        return inner(context, request)
    cluster_topics = context.cluster.topics
    zero = uuid.UUID(int=0)
    by_name = context.api_version < 6
    entries: list[Any] = list(request.topic_names) if by_name else list(request.topics)
    keys = [(entry, zero) if by_name else (entry.name, entry.topic_id) for entry in entries]
    counts: dict[tuple[str | None, uuid.UUID], int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    refused: list[tuple[str | None, uuid.UUID]] = []
    kept = []
    for item, (name, topic_id) in zip(entries, keys, strict=True):
        if counts[(name, topic_id)] > 1 or (name is None) == (topic_id == zero):
            kept.append(item)  # INVALID_REQUEST from the handler
            continue
        if name is None:  # by id
            topic = cluster_topics.by_id(topic_id)
            if topic is None or check(_Op.DELETE, _Type.TOPIC, topic.name):
                kept.append(item)
            else:
                refused.append((topic.name if check(_Op.DESCRIBE, _Type.TOPIC, topic.name) else None, topic_id))
        elif not check(_Op.DESCRIBE, _Type.TOPIC, name) or (
                cluster_topics.get(name) is not None and not check(_Op.DELETE, _Type.TOPIC, name)):
            refused.append((name, zero))
        else:
            kept.append(item)  # allowed, or UNKNOWN_TOPIC_OR_PARTITION from the handler
    if not refused:
        return inner(context, request)
    request = copy.copy(request)
    if by_name:
        request.topic_names = kept
    else:
        request.topics = kept

    def patch(response: Any) -> None:
        for name, topic_id in refused:
            values: dict[str, Any] = {"name": name, "error_code": TOPIC_FAILED, "error_message": None}
            if not by_name:
                values["topic_id"] = topic_id
            response.responses.append(entry(response, "responses", **values))

    return answer_later(inner(context, request), patch)


# top-level checks ----------------------------------------------------------------------------
def _needs(*checks: tuple[AclOperation, ResourceType, Callable[[Any], str | None], ErrorCode]
           ) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    """A rule that answers the whole request with an error unless every check passes (a name of None
    skips its check)."""
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = Check(authorizer, context)
        for operation, resource_type, name_of, error in checks:
            name = name_of(request)
            if name is not None and not check(operation, resource_type, name):
                return error_answer(context, request, error)
        return inner(context, request)
    return rule


def _cluster(request: Any) -> str:
    return CLUSTER_NAME


def _group_id(request: Any) -> str:
    return str(request.group_id)


def _transactional_id(request: Any) -> str | None:
    return getattr(request, "transactional_id", None) or None


def _init_producer_id(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = Check(authorizer, context)
    if request.transactional_id:
        if not check(_Op.WRITE, _Type.TRANSACTIONAL_ID, request.transactional_id):
            return error_answer(context, request, TXN_FAILED)
    elif not check(_Op.IDEMPOTENT_WRITE, _Type.CLUSTER):
        return error_answer(context, request, CLUSTER_FAILED)
    return inner(context, request)


def _add_partitions_to_txn(authorizer: Authorizer, inner: Inner, context: RequestContext,
                           request: Any) -> HandlerResult:
    check = Check(authorizer, context)
    if context.api_version >= 4:  # between brokers
        return inner(context, request) if check(_Op.CLUSTER_ACTION, _Type.CLUSTER) else \
            error_answer(context, request, CLUSTER_FAILED)
    if not check(_Op.WRITE, _Type.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return error_answer(context, request, TXN_FAILED)
    topics = Topics(context)
    partitions = request_partitions(context.api_key, context.api_version, request, topics) or []
    failing = frozenset(item for item in partitions if not check(_Op.WRITE, _Type.TOPIC, item[0]))
    if not failing:
        return inner(context, request)
    response = error_answer(context, request, ErrorCode.OPERATION_NOT_ATTEMPTED)  # Kafka adds none of them then
    fail_partitions(context.api_key, context.api_version, request, response, failing, TOPIC_FAILED, topics)
    return response


def _find_coordinator(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = Check(authorizer, context)

    def refused(key: str) -> ErrorCode | None:
        if request.key_type == 1:
            return None if check(_Op.DESCRIBE, _Type.TRANSACTIONAL_ID, key) else TXN_FAILED
        return None if check(_Op.DESCRIBE, _Type.GROUP, key) else GROUP_FAILED

    if context.api_version < 4:
        error = refused(request.key)
        if error is None:
            return inner(context, request)
        return error_answer(context, request, error)
    errors = {key: error for key in request.coordinator_keys if (error := refused(key)) is not None}
    if not errors:
        return inner(context, request)
    request = copy.copy(request)
    request.coordinator_keys = [key for key in request.coordinator_keys if key not in errors]

    def patch(response: Any) -> None:
        for key, error in errors.items():
            response.coordinators.append(entry(response, "coordinators", key=key, node_id=-1, host="", port=-1,
                                                error_code=error, error_message=None))

    return answer_later(inner(context, request), patch)


def _filtered(field: str, keep: Callable[[Check, Any], bool], everything: AclOperation | None = None
              ) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    """A listing answered with only the entries the principal may see (all of them with ``everything``
    on the cluster)."""
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = Check(authorizer, context)
        if everything is not None and check(everything, _Type.CLUSTER):
            return inner(context, request)

        def patch(response: Any) -> None:
            setattr(response, field, [entry for entry in getattr(response, field) if keep(check, entry)])

        return answer_later(inner(context, request), patch)
    return rule


def _describe_cluster(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = Check(authorizer, context)

    def patch(response: Any) -> None:
        if request.include_cluster_authorized_operations:
            response.cluster_authorized_operations = check.operations(_Type.CLUSTER)

    return answer_later(inner(context, request), patch)


def _fallback(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = Check(authorizer, context)
    group_id = getattr(request, "group_id", None)
    if isinstance(group_id, str):
        return inner(context, request) if check(_Op.READ, _Type.GROUP, group_id) else \
            error_answer(context, request, GROUP_FAILED)
    return inner(context, request) if check(_Op.DESCRIBE, _Type.CLUSTER) else \
        error_answer(context, request, CLUSTER_FAILED)


def _rules() -> dict[int, Rule]:
    cluster_needs = {key: _needs((operation, _Type.CLUSTER, _cluster, CLUSTER_FAILED)) for key, operation in {
        29: _Op.DESCRIBE, 30: _Op.ALTER, 31: _Op.ALTER, 34: _Op.ALTER, 35: _Op.DESCRIBE, 43: _Op.ALTER,
        45: _Op.ALTER, 46: _Op.DESCRIBE, 50: _Op.DESCRIBE, 51: _Op.ALTER, 55: _Op.DESCRIBE,
        74: _Op.DESCRIBE_CONFIGS}.items()}
    group_read = _needs((_Op.READ, _Type.GROUP, _group_id, GROUP_FAILED))
    return {
        **cluster_needs,
        0: _partitioned(_Op.WRITE, transactional=True),
        1: _partitioned(_Op.READ, replica_fetch=True),
        2: _partitioned(_Op.DESCRIBE),
        3: _metadata,
        8: _partitioned(_Op.READ, group=True),
        9: offset_fetch,
        10: _find_coordinator,
        11: group_read, 12: group_read, 13: group_read, 14: group_read, 68: group_heartbeat, 76: group_heartbeat,
        71: unchecked, 72: unchecked, 78: share_topics, 79: share_topics, 90: describe_share_group_offsets,
        91: topics_in_list(_Op.READ, _Op.READ, "topic_name", "responses", "topic_name",
                            lambda topic: [partition.partition_index for partition in topic.partitions]),
        92: topics_in_list(_Op.DELETE, _Op.READ, "topic_name", "responses", "topic_name", None),
        15: _named(lambda request, version: list(request.groups), _set("groups"), lambda response: response.groups,
                   lambda response, group, version: entry(response, "groups", group_id=group, error_code=GROUP_FAILED,
                                                           members=[]),
                   lambda check, group: check(_Op.DESCRIBE, _Type.GROUP, group), _group_operations("groups")),
        16: _filtered("groups", lambda check, group: check(_Op.DESCRIBE, _Type.GROUP, group.group_id), _Op.DESCRIBE),
        19: _named(lambda request, version: list(request.topics), _set("topics"), lambda response: response.topics,
                   lambda response, topic, version: entry(response, "topics", name=topic.name, error_code=TOPIC_FAILED,
                                                           error_message=None, configs=None),
                   lambda check, topic: check(_Op.CREATE, _Type.CLUSTER) or check(_Op.CREATE, _Type.TOPIC, topic.name)),
        20: _delete_topics,
        21: _partitioned(_Op.DELETE),
        22: _init_producer_id,
        23: _partitioned(_Op.DESCRIBE),
        24: _add_partitions_to_txn,
        25: _needs((_Op.WRITE, _Type.TRANSACTIONAL_ID, _transactional_id, TXN_FAILED),
                   (_Op.READ, _Type.GROUP, _group_id, GROUP_FAILED)),
        26: _needs((_Op.WRITE, _Type.TRANSACTIONAL_ID, _transactional_id, TXN_FAILED)),
        28: _partitioned(_Op.READ, transactional=True, group=True),
        32: _named(lambda request, version: list(request.resources), _set("resources"),
                   lambda response: response.results, _config_refused("results"),
                   _config_allowed(_Op.DESCRIBE_CONFIGS)),
        33: _named(lambda request, version: list(request.resources), _set("resources"),
                   lambda response: response.responses, _config_refused("responses"),
                   _config_allowed(_Op.ALTER_CONFIGS)),
        44: _named(lambda request, version: list(request.resources), _set("resources"),
                   lambda response: response.responses, _config_refused("responses"),
                   _config_allowed(_Op.ALTER_CONFIGS)),
        37: _named(lambda request, version: list(request.topics), _set("topics"), lambda response: response.results,
                   lambda response, topic, version: entry(response, "results", name=topic.name,
                                                           error_code=TOPIC_FAILED, error_message=None),
                   lambda check, topic: check(_Op.ALTER, _Type.TOPIC, topic.name)),
        42: _named(lambda request, version: list(request.groups_names), _set("groups_names"),
                   lambda response: response.results,
                   lambda response, group, version: entry(response, "results", group_id=group,
                                                           error_code=GROUP_FAILED),
                   lambda check, group: check(_Op.DELETE, _Type.GROUP, group)),
        47: topics_in_list(_Op.DELETE, _Op.READ, "name", "topics", "name",
                            lambda topic: [partition.partition_index for partition in topic.partitions]),
        60: _describe_cluster,
        61: topics_in_list(None, _Op.READ, "name", "topics", "name", lambda topic: list(topic.partition_indexes)),
        65: _named(lambda request, version: list(request.transactional_ids), _set("transactional_ids"),
                   lambda response: response.transaction_states,
                   lambda response, txn, version: entry(response, "transaction_states", transactional_id=txn,
                                                         error_code=TXN_FAILED, topics=[]),
                   lambda check, txn: check(_Op.DESCRIBE, _Type.TRANSACTIONAL_ID, txn)),
        66: _filtered("transaction_states",
                      lambda check, state: check(_Op.DESCRIBE, _Type.TRANSACTIONAL_ID, state.transactional_id)),
        69: group_describe, 77: group_describe,
        75: _filtered("topics", lambda check, topic: check(_Op.DESCRIBE, _Type.TOPIC, topic.name or "")),
    }


def authorizing_handlers(handlers: Mapping[int, ApiHandler], authorizer: Authorizer) -> dict[int, ApiHandler]:
    """``handlers`` with each handler wrapped in its ACL checks (see the module docstring)."""
    rules = _rules()
    wrapped: dict[int, ApiHandler] = {}
    for api_key, handler in handlers.items():
        if api_key in _UNCHECKED:
            wrapped[api_key] = handler
            continue
        rule = rules.get(api_key, _fallback)
        wrapped[api_key] = dataclasses.replace(handler, handle=_bind(rule, authorizer, handler.handle))
    return wrapped


def _bind(rule: Rule, authorizer: Authorizer, inner: Inner) -> Inner:
    def handle(context: RequestContext, request: Any) -> HandlerResult:
        return rule(authorizer, inner, context, request)
    return handle


def rule_keys() -> Iterable[int]:
    """The API keys with a rule of their own (the rest use the fallback)."""
    return _rules().keys()
