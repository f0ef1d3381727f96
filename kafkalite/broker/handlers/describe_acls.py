"""DescribeAcls (API key 29), v1-3: answered as Kafka answers it with no authorizer configured.

kafkalite loads no authorizer (``authorizer.class.name`` is accepted without effect), so there are
no ACLs to list and every request is allowed. Kafka's broker answers this API then with
SECURITY_DISABLED and the message "No Authorizer is configured on the broker", which admin clients
report as such (not as an API the broker lacks). v0 (removed in Kafka 4) is not served. Not
implemented: ACLs themselves; they come with an authorizer.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeAclsRequest, DescribeAclsResponse

__all__ = ["NO_AUTHORIZER", "handle_describe_acls"]

NO_AUTHORIZER = "No Authorizer is configured on the broker"


@handles(api_key=29, min_version=1, max_version=3)
def handle_describe_acls(context: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER, resources=[])
