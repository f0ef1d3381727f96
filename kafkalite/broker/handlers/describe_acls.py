"""DescribeAcls (API key 29), v1-3: the ACL bindings that match a filter, grouped by resource pattern.

With an authorizer, the filter (``kafkalite.broker.security.acls.AclBindingFilter``: ANY, MATCH,
null names) selects the stored bindings; a filter with an UNKNOWN code is INVALID_REQUEST. Without
one the answer is SECURITY_DISABLED with Kafka's message "No Authorizer is configured on the broker",
which admin clients report as such. The principal needs DESCRIBE on the cluster. v0 (removed in
Kafka 4) is not served.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.broker.security.acls import binding_filter
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeAclsRequest, DescribeAclsResponse
from kafkalite.protocol.messages.describe_acls_response import AclDescription, DescribeAclsResource

__all__ = ["NO_AUTHORIZER", "handle_describe_acls"]

NO_AUTHORIZER = "No Authorizer is configured on the broker"


@handles(api_key=29, min_version=1, max_version=3)
def handle_describe_acls(context: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = None if context.session is None else context.session.authorizer
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER, resources=[])
    acl_filter = binding_filter(request.resource_type_filter, request.resource_name_filter,
                                request.pattern_type_filter, request.principal_filter, request.host_filter,
                                request.operation, request.permission_type)
    problem = acl_filter.check()
    if problem is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=problem, resources=[])
    resources: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in authorizer.acls.matching(acl_filter):
        resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(AclDescription(
            principal=acl.principal, host=acl.host, operation=acl.operation, permission_type=acl.permission_type))
    return DescribeAclsResponse(error_message=None, resources=[
        DescribeAclsResource(resource_type=resource_type, resource_name=name, pattern_type=pattern_type, acls=acls)
        for (resource_type, name, pattern_type), acls in resources.items()])
