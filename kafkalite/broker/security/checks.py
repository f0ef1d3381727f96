"""What every ACL rule uses: the principal's check, the topics by name and id, answers patched later.

A rule (``Rule``) takes the authorizer, the real handler (``Inner``), the request's context and its
body; it answers, or calls the handler, maybe with a request that leaves out what is refused, and
patches the refusals into the handler's answer (``answer_later``: at once, or once the handler's
awaitable has it). ``error_answer`` is the whole answer with one error where the API keeps it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kafkalite.broker.admin.fault_responses import error_response
from kafkalite.broker.handlers.registry import HandlerResult, RequestContext
from kafkalite.broker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.principal import ANONYMOUS
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import RESPONSES

__all__ = ["CLUSTER_FAILED", "Check", "GROUP_FAILED", "Inner", "Rule", "TOPIC_FAILED", "TXN_FAILED", "Topics",
           "answer_later", "element_type", "entry", "error_answer", "split_topics"]

TOPIC_FAILED, GROUP_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
TXN_FAILED, CLUSTER_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
Inner = Callable[[RequestContext, Any], HandlerResult]
Rule = Callable[[Authorizer, Inner, RequestContext, Any], HandlerResult]


class Topics:
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


class Check:
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


def answer_later(result: HandlerResult, patch: Callable[[Any], None]) -> HandlerResult:
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


def error_answer(context: RequestContext, request: Any, error: ErrorCode) -> Message:
    """The whole answer with ``error`` where the API keeps it. An API without such a place refuses by
    closing the connection (``KafkaError`` from a handler does that, with a log line)."""
    response = _special_error(context.api_key, request, error) or error_response(
        context.api_key, context.api_version, request, error, Topics(context))
    if response is None:
        raise KafkaError(error, f"{context.api_key} refused and has no place for the error")
    return response


def _special_error(api_key: int, request: Any, error: ErrorCode) -> Any:
    """The APIs whose answers keep errors per item of the request, which ``error_response`` does not know."""
    response: Any
    if api_key == 30:  # CreateAcls: one result per creation
        response = RESPONSES[30]()
        response.results = [entry(response, "results", error_code=error, error_message=None)
                            for _ in request.creations]
        return response
    if api_key == 31:  # DeleteAcls: one result per filter
        response = RESPONSES[31]()
        response.filter_results = [entry(response, "filter_results", error_code=error, error_message=None,
                                          matching_acls=[]) for _ in request.filters]
        return response
    if api_key == 51:  # AlterUserScramCredentials: one result per user
        response = RESPONSES[51]()
        users = dict.fromkeys(item.name for item in [*request.deletions, *request.upsertions])
        response.results = [entry(response, "results", user=user, error_code=error, error_message=None)
                            for user in users]
        return response
    return None


def entry(response: Any, field: str, **values: Any) -> Any:
    spec = next(spec for spec in type(response).FIELDS if spec.name == field)
    return spec.struct(**values)


def element_type(owner: Any, field: str) -> Any:
    return next(spec.struct for spec in owner.FIELDS if spec.name == field)


def split_topics(check: Check, operation: AclOperation, topics: list[Any] | None,
                    name: Callable[[Any], str] = lambda topic: str(topic.name)) -> tuple[list[Any] | None, list[Any]]:
    """The request's topics split into those allowed ``operation`` and those refused (None stays None:
    every topic, filtered in the answer instead)."""
    if topics is None:
        return None, []
    refused = [topic for topic in topics if not check(operation, ResourceType.TOPIC, name(topic))]
    return ([topic for topic in topics if topic not in refused] if refused else topics), refused
