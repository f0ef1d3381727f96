"""Authorization of every API: the handler registry, each handler wrapped in Kafka's ACL checks.

With an authorizer (``authorizer.class.name``), ``authorizing_handlers`` gives the connections a copy
of ``HANDLERS`` whose handlers check the request's principal (``context.session``) before and after
the real handler runs, with Kafka's resource and operation for each API (KafkaApis, and the
"Authorization and ACLs" table of Kafka's documentation). What is refused is answered where the API
keeps its errors, and not handed to the handler:

* partitions (Produce, Fetch, ListOffsets, OffsetCommit, DeleteRecords, OffsetForLeaderEpoch,
  TxnOffsetCommit): the partitions of topics without the operation are taken out of the request and
  answered TOPIC_AUTHORIZATION_FAILED; a transactional id or group the request needs and may not use
  fails every partition (TRANSACTIONAL_ID_/GROUP_AUTHORIZATION_FAILED);
* Metadata: topics without DESCRIBE are left out of an all-topics answer and answered
  TOPIC_AUTHORIZATION_FAILED when named (also when they do not exist and may not be created);
  authorized operations are filled when asked for;
* groups, transactional ids, topics named in lists (DescribeGroups, DeleteGroups, CreateTopics,
  DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, DescribeTransactions,
  FindCoordinator v4+, OffsetFetch v8+...): each refused name gets its own error entry;
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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kafkalite.broker.admin.fault_responses import error_response, fail_partitions, request_partitions, split_request
from kafkalite.broker.handlers.registry import ApiHandler, HandlerResult, RequestContext
from kafkalite.broker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.principal import ANONYMOUS
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import RESPONSES

__all__ = ["authorizing_handlers"]

_Op, _Type = AclOperation, ResourceType
TOPIC_FAILED, GROUP_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
TXN_FAILED, CLUSTER_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
_UNCHECKED = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate
_UNKNOWN_OPERATIONS = -2147483648  # "not asked for" in authorized-operations fields
Inner = Callable[[RequestContext, Any], HandlerResult]


class _Topics:
    """The cluster's topics as ``fault_responses`` asks about them."""

    def __init__(self, context: RequestContext) -> None:
        self._topics = context.cluster.topics

    def name_of(self, topic_id: uuid.UUID) -> str:
        try:
            return self._topics.name_of(topic_id)
        except Exception:
            return ""

    def id_of(self, name: str) -> uuid.UUID:
        topic = self._topics.get(name)
        return topic.topic_id if topic is not None else uuid.UUID(int=0)

    def partition_count(self, name: str) -> int:
        topic = self._topics.get(name)
        return 0 if topic is None else len(topic.partitions)

    def names(self) -> list[str]:
        return [topic.name for topic in self._topics]

    def exists(self, name: str) -> bool:
        return self._topics.get(name) is not None


class _Check:
    """The authorizer's answers for one request's principal and host."""

    def __init__(self, authorizer: Authorizer, context: RequestContext) -> None:
        session = context.session
        self.authorizer = authorizer
        self.principal = ANONYMOUS if session is None else session.principal
        self.host = "" if session is None else session.host

    def __call__(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name)


def _then(result: HandlerResult, patch: Callable[[Any], None]) -> HandlerResult:
    """Apply ``patch`` to the response, now or once the handler's awaitable has it."""
    if result is None:
        return None
    if isinstance(result, Message):
        patch(result)
        return result

    async def later(pending: Awaitable[Message | None]) -> Message | None:
        response = await pending
        if response is not None:
            patch(response)
        return response

    return later(result)


def _error(context: RequestContext, request: Any, error: ErrorCode) -> Message:
    """The whole answer with ``error`` where the API keeps it. An API without such a place refuses by
    closing the connection (``KafkaError`` from a handler does that, with a log line)."""
    response = _special_error(context.api_key, request, error) or error_response(
        context.api_key, context.api_version, request, error, _Topics(context))
    if response is None:
        raise KafkaError(error, f"{context.api_key} refused and has no place for the error")
    return response


def _special_error(api_key: int, request: Any, error: ErrorCode) -> Any:
    """The APIs whose answers keep errors per item of the request, which ``error_response`` does not know."""
    response: Any
    if api_key == 30:  # CreateAcls: one result per creation
        response = RESPONSES[30]()
        response.results = [_entry(response, "results", error_code=error, error_message=None)
                            for _ in request.creations]
        return response
    if api_key == 31:  # DeleteAcls: one result per filter
        response = RESPONSES[31]()
        response.filter_results = [_entry(response, "filter_results", error_code=error, error_message=None,
                                          matching_acls=[]) for _ in request.filters]
        return response
    if api_key == 51:  # AlterUserScramCredentials: one result per user
        response = RESPONSES[51]()
        users = dict.fromkeys(item.name for item in [*request.deletions, *request.upsertions])
        response.results = [_entry(response, "results", user=user, error_code=error, error_message=None)
                            for user in users]
        return response
    return None


# partitioned APIs ------------------------------------------------------------------------------
def _partitioned(topic_operation: AclOperation, *, transactional: bool = False, group: bool = False,
                 replica_fetch: bool = False) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = _Check(authorizer, context)
        if transactional and getattr(request, "transactional_id", None) \
                and not check(_Op.WRITE, _Type.TRANSACTIONAL_ID, request.transactional_id):
            return _error(context, request, TXN_FAILED)
        if group and not check(_Op.READ, _Type.GROUP, request.group_id):
            return _error(context, request, GROUP_FAILED)
        if replica_fetch and max(getattr(request, "replica_id", -1), _replica_state_id(request)) >= 0:
            return inner(context, request) if check(_Op.CLUSTER_ACTION, _Type.CLUSTER) else \
                _error(context, request, CLUSTER_FAILED)
        topics = _Topics(context)
        partitions = request_partitions(context.api_key, context.api_version, request, topics) or []
        refused_topics = {name for name in {name for name, _ in partitions} if not check(topic_operation, _Type.TOPIC,
                                                                                          name)}
        if not refused_topics:
            return inner(context, request)
        failing = frozenset(item for item in partitions if item[0] in refused_topics)
        allowed = split_request(context.api_key, context.api_version, request, failing, topics)
        return _then(inner(context, allowed), lambda response: fail_partitions(
            context.api_key, context.api_version, request, response, failing, TOPIC_FAILED, topics))
    return rule


def _replica_state_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    return -1 if state is None else int(getattr(state, "replica_id", -1))


# Metadata ------------------------------------------------------------------------------------
def _metadata(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = _Check(authorizer, context)
    topics = _Topics(context)
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

    return _then(inner(context, request), patch)


# requests that name resources in a list ----------------------------------------------------------
def _named(names_of: Callable[[Any, int], list[Any]], keep: Callable[[Any, Any, list[Any], int], None],
           answers_of: Callable[[Any], list[Any]], refuse: Callable[[Any, Any, int], Any],
           allowed: Callable[[_Check, Any], bool],
           operations: Callable[[_Check, Any, Any], None] | None = None
           ) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    """A rule for requests naming resources in a list: the refused items are taken out of the request
    and answered with ``refuse(response, item, version)`` (an error entry)."""
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = _Check(authorizer, context)
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

        return _then(inner(context, request), patch)
    return rule


def _entry(response: Any, field: str, **values: Any) -> Any:
    spec = next(spec for spec in type(response).FIELDS if spec.name == field)
    return spec.struct(**values)


def _group_operations(field: str) -> Callable[[_Check, Any, Any], None]:
    def fill(check: _Check, request: Any, response: Any) -> None:
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


def _config_allowed(operation: AclOperation) -> Callable[[_Check, Any], bool]:
    def allowed(check: _Check, resource: Any) -> bool:
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
        return _entry(response, field, **values)
    return refuse


def _delete_topics_names(request: Any, version: int) -> list[Any]:
    return list(request.topic_names) if version < 6 else list(request.topics)


def _delete_topics_keep(request: Any, kept: list[Any], refused: list[Any], version: int) -> None:
    if version < 6:
        request.topic_names = kept
    else:
        request.topics = kept


# top-level checks ----------------------------------------------------------------------------
def _needs(*checks: tuple[AclOperation, ResourceType, Callable[[Any], str | None], ErrorCode]
           ) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    """A rule that answers the whole request with an error unless every check passes (a name of None
    skips its check)."""
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = _Check(authorizer, context)
        for operation, resource_type, name_of, error in checks:
            name = name_of(request)
            if name is not None and not check(operation, resource_type, name):
                return _error(context, request, error)
        return inner(context, request)
    return rule


def _cluster(request: Any) -> str:
    return CLUSTER_NAME


def _group_id(request: Any) -> str:
    return str(request.group_id)


def _transactional_id(request: Any) -> str | None:
    return getattr(request, "transactional_id", None) or None


def _init_producer_id(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = _Check(authorizer, context)
    if request.transactional_id:
        if not check(_Op.WRITE, _Type.TRANSACTIONAL_ID, request.transactional_id):
            return _error(context, request, TXN_FAILED)
    elif not check(_Op.IDEMPOTENT_WRITE, _Type.CLUSTER):
        return _error(context, request, CLUSTER_FAILED)
    return inner(context, request)


def _add_partitions_to_txn(authorizer: Authorizer, inner: Inner, context: RequestContext,
                           request: Any) -> HandlerResult:
    check = _Check(authorizer, context)
    if context.api_version >= 4:  # between brokers
        return inner(context, request) if check(_Op.CLUSTER_ACTION, _Type.CLUSTER) else \
            _error(context, request, CLUSTER_FAILED)
    if not check(_Op.WRITE, _Type.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return _error(context, request, TXN_FAILED)
    topics = _Topics(context)
    partitions = request_partitions(context.api_key, context.api_version, request, topics) or []
    failing = frozenset(item for item in partitions if not check(_Op.WRITE, _Type.TOPIC, item[0]))
    if not failing:
        return inner(context, request)
    response = _error(context, request, ErrorCode.OPERATION_NOT_ATTEMPTED)  # Kafka adds none of them then
    fail_partitions(context.api_key, context.api_version, request, response, failing, TOPIC_FAILED, topics)
    return response


def _find_coordinator(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = _Check(authorizer, context)

    def refused(key: str) -> ErrorCode | None:
        if request.key_type == 1:
            return None if check(_Op.DESCRIBE, _Type.TRANSACTIONAL_ID, key) else TXN_FAILED
        return None if check(_Op.DESCRIBE, _Type.GROUP, key) else GROUP_FAILED

    if context.api_version < 4:
        error = refused(request.key)
        if error is None:
            return inner(context, request)
        return _error(context, request, error)
    errors = {key: error for key in request.coordinator_keys if (error := refused(key)) is not None}
    if not errors:
        return inner(context, request)
    request = copy.copy(request)
    request.coordinator_keys = [key for key in request.coordinator_keys if key not in errors]

    def patch(response: Any) -> None:
        for key, error in errors.items():
            response.coordinators.append(_entry(response, "coordinators", key=key, node_id=-1, host="", port=-1,
                                                error_code=error, error_message=None))

    return _then(inner(context, request), patch)


def _offset_fetch(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = _Check(authorizer, context)

    def visible(topics: list[Any]) -> list[Any]:
        return [topic for topic in topics if check(_Op.DESCRIBE, _Type.TOPIC, topic.name)]

    if context.api_version < 8:
        if not check(_Op.DESCRIBE, _Type.GROUP, request.group_id):
            return _error(context, request, GROUP_FAILED)

        def patch_single(response: Any) -> None:
            response.topics = visible(response.topics)

        return _then(inner(context, request), patch_single)
    refused = [group for group in request.groups if not check(_Op.DESCRIBE, _Type.GROUP, group.group_id)]
    if refused:
        request = copy.copy(request)
        request.groups = [group for group in request.groups if group not in refused]

    def patch(response: Any) -> None:
        for group in response.groups:
            group.topics = visible(group.topics)
        for group in refused:
            response.groups.append(_entry(response, "groups", group_id=group.group_id, topics=[],
                                          error_code=GROUP_FAILED))

    return _then(inner(context, request), patch)


def _filtered(field: str, keep: Callable[[_Check, Any], bool], everything: AclOperation | None = None
              ) -> Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]:
    """A listing answered with only the entries the principal may see (all of them with ``everything``
    on the cluster)."""
    def rule(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
        check = _Check(authorizer, context)
        if everything is not None and check(everything, _Type.CLUSTER):
            return inner(context, request)

        def patch(response: Any) -> None:
            setattr(response, field, [entry for entry in getattr(response, field) if keep(check, entry)])

        return _then(inner(context, request), patch)
    return rule


def _describe_cluster(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = _Check(authorizer, context)

    def patch(response: Any) -> None:
        if request.include_cluster_authorized_operations:
            response.cluster_authorized_operations = check.operations(_Type.CLUSTER)

    return _then(inner(context, request), patch)


def _fallback(authorizer: Authorizer, inner: Inner, context: RequestContext, request: Any) -> HandlerResult:
    check = _Check(authorizer, context)
    group_id = getattr(request, "group_id", None)
    if isinstance(group_id, str):
        return inner(context, request) if check(_Op.READ, _Type.GROUP, group_id) else \
            _error(context, request, GROUP_FAILED)
    return inner(context, request) if check(_Op.DESCRIBE, _Type.CLUSTER) else \
        _error(context, request, CLUSTER_FAILED)


Rule = Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]


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
        9: _offset_fetch,
        10: _find_coordinator,
        11: group_read, 12: group_read, 13: group_read, 14: group_read, 68: group_read, 76: group_read,
        15: _named(lambda request, version: list(request.groups), _set("groups"), lambda response: response.groups,
                   lambda response, group, version: _entry(response, "groups", group_id=group, error_code=GROUP_FAILED,
                                                           members=[]),
                   lambda check, group: check(_Op.DESCRIBE, _Type.GROUP, group), _group_operations("groups")),
        16: _filtered("groups", lambda check, group: check(_Op.DESCRIBE, _Type.GROUP, group.group_id), _Op.DESCRIBE),
        19: _named(lambda request, version: list(request.topics), _set("topics"), lambda response: response.topics,
                   lambda response, topic, version: _entry(response, "topics", name=topic.name, error_code=TOPIC_FAILED,
                                                           error_message=None, configs=None),
                   lambda check, topic: check(_Op.CREATE, _Type.CLUSTER) or check(_Op.CREATE, _Type.TOPIC, topic.name)),
        20: _named(_delete_topics_names, _delete_topics_keep, lambda response: response.responses,
                   lambda response, topic, version: _entry(response, "responses", name=_topic_name(topic),
                                                           error_code=TOPIC_FAILED, error_message=None),
                   lambda check, topic: bool(_topic_name(topic))
                   and check(_Op.DELETE, _Type.TOPIC, _topic_name(topic))),
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
                   lambda response, topic, version: _entry(response, "results", name=topic.name,
                                                           error_code=TOPIC_FAILED, error_message=None),
                   lambda check, topic: check(_Op.ALTER, _Type.TOPIC, topic.name)),
        42: _named(lambda request, version: list(request.groups_names), _set("groups_names"),
                   lambda response: response.results,
                   lambda response, group, version: _entry(response, "results", group_id=group,
                                                           error_code=GROUP_FAILED),
                   lambda check, group: check(_Op.DELETE, _Type.GROUP, group)),
        47: _needs((_Op.DELETE, _Type.GROUP, _group_id, GROUP_FAILED)),
        60: _describe_cluster,
        61: _filtered("topics", lambda check, topic: check(_Op.READ, _Type.TOPIC, topic.name)),
        65: _named(lambda request, version: list(request.transactional_ids), _set("transactional_ids"),
                   lambda response: response.transaction_states,
                   lambda response, txn, version: _entry(response, "transaction_states", transactional_id=txn,
                                                         error_code=TXN_FAILED, topics=[]),
                   lambda check, txn: check(_Op.DESCRIBE, _Type.TRANSACTIONAL_ID, txn)),
        66: _filtered("transaction_states",
                      lambda check, state: check(_Op.DESCRIBE, _Type.TRANSACTIONAL_ID, state.transactional_id)),
        69: _named(lambda request, version: list(request.group_ids), _set("group_ids"),
                   lambda response: response.groups,
                   lambda response, group, version: _entry(response, "groups", group_id=group, error_code=GROUP_FAILED,
                                                           error_message=None, members=[]),
                   lambda check, group: check(_Op.DESCRIBE, _Type.GROUP, group), _group_operations("groups")),
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
