"""FindCoordinator (API key 10), v0-6: this node coordinates every group, transactional id and share
partition.

Key types 0 (group: classic, consumer and share groups), 1 (transaction) and 2 (share: the share
coordinator of a ``group:topic id:partition`` key) are answered with this node; an unknown type gets
INVALID_REQUEST with no node. v0-3 look up one ``key``; v4+ look up every key of ``coordinator_keys``
and answer each with its own error. A group lookup creates ``__consumer_offsets`` if it does not exist
yet, as Kafka does.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from kafkalite.protocol.messages.find_coordinator_response import Coordinator

__all__ = ["handle_find_coordinator"]

GROUP = 0
TRANSACTION = 1
SHARE = 2


@handles(api_key=10, min_version=0, max_version=6)
def handle_find_coordinator(context: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    cluster = context.cluster
    version = context.api_version
    key_type = request.key_type if version >= 1 else GROUP
    if key_type == GROUP:
        cluster.group_coordinator.ensure_offsets_topic()
    error = ErrorCode.NONE if key_type in (GROUP, TRANSACTION, SHARE) else ErrorCode.INVALID_REQUEST
    message = None if error is ErrorCode.NONE else f"Unsupported coordinator key type {key_type}"
    endpoint = cluster.endpoint_for(context.listener_name)
    node_id, host, port = (cluster.node_id, endpoint.host, endpoint.port) if error is ErrorCode.NONE else (-1, "", -1)
    if version < 4:
        return FindCoordinatorResponse(error_code=error, error_message=message, node_id=node_id, host=host, port=port)
    return FindCoordinatorResponse(coordinators=[
        Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=error, error_message=message)
        for key in request.coordinator_keys])
