"""DescribeCluster (API key 60), v0-1: the cluster id, the controller and the brokers (the admin view).

This node is the only broker and is reported as the controller, as Metadata does. v1 asks for an
endpoint type: brokers (1) are described; controllers (2) get MISMATCHED_ENDPOINT_TYPE and any
other type UNSUPPORTED_ENDPOINT_TYPE, which is what a Kafka broker answers (INVALID_REQUEST at v0).
With ``include_cluster_authorized_operations`` every cluster operation is reported as allowed,
which is Kafka's answer without an authorizer; otherwise the field keeps its "not requested"
value (-2147483648). Not implemented: v2 (``include_fenced_brokers``; nothing is ever fenced here).
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from kafkalite.protocol.messages.describe_cluster_response import DescribeClusterBroker

__all__ = ["handle_describe_cluster"]

BROKERS = 1
CONTROLLERS = 2
_ENDPOINT_NAMES = {BROKERS: "BROKER", CONTROLLERS: "CONTROLLER"}
NOT_REQUESTED = -(2**31)
# Kafka's AclOperation codes supported on the CLUSTER resource: CREATE (5), ALTER (7), DESCRIBE (8),
# CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11), IDEMPOTENT_WRITE (12).
CLUSTER_OPERATIONS = sum(1 << operation for operation in (5, 7, 8, 9, 10, 11, 12))


@handles(api_key=60, min_version=0, max_version=1)
def handle_describe_cluster(context: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    cluster = context.cluster
    endpoint_type = request.endpoint_type if context.api_version >= 1 else BROKERS
    if endpoint_type not in _ENDPOINT_NAMES:
        code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE if context.api_version >= 1 else ErrorCode.INVALID_REQUEST
        return DescribeClusterResponse(error_code=code, error_message=f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type != BROKERS:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE if context.api_version >= 1 else ErrorCode.INVALID_REQUEST
        return DescribeClusterResponse(
            error_code=code,
            error_message=f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                          f"{_ENDPOINT_NAMES[endpoint_type]}")
    endpoint = cluster.endpoint_for(context.listener_name)
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.node_id,
        brokers=[DescribeClusterBroker(broker_id=cluster.node_id, host=endpoint.host, port=endpoint.port,
                                       rack=cluster.config.get("broker.rack"))],
        cluster_authorized_operations=(CLUSTER_OPERATIONS if request.include_cluster_authorized_operations
                                       else NOT_REQUESTED),
    )
