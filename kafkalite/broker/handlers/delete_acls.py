"""DeleteAcls (API key 31), v1-3: remove the ACL bindings that match each filter, and list them.

With an authorizer, each filter removes the stored bindings it matches (see
``kafkalite.broker.security.acls``) and answers them; a filter with an UNKNOWN code is INVALID_REQUEST.
Without one every filter gets SECURITY_DISABLED with Kafka's message "No Authorizer is configured.".
The principal needs ALTER on the cluster. v0 (removed in Kafka 4) is not served.
"""

from __future__ import annotations

from kafkalite.broker.handlers.create_acls import NO_AUTHORIZER
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.broker.security.acls import binding_filter
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from kafkalite.protocol.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsMatchingAcl

__all__ = ["handle_delete_acls"]


@handles(api_key=31, min_version=1, max_version=3)
def handle_delete_acls(context: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = None if context.session is None else context.session.authorizer
    if authorizer is None:
        return DeleteAclsResponse(filter_results=[
            DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                                   matching_acls=[])
            for _ in request.filters])
    results = []
    for item in request.filters:
        acl_filter = binding_filter(item.resource_type_filter, item.resource_name_filter, item.pattern_type_filter,
                                    item.principal_filter, item.host_filter, item.operation, item.permission_type)
        problem = acl_filter.check()
        if problem is not None:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem,
                                                  matching_acls=[]))
            continue
        removed = authorizer.acls.remove_matching(acl_filter)
        results.append(DeleteAclsFilterResult(error_message=None, matching_acls=[
            DeleteAclsMatchingAcl(error_message=None, resource_type=acl.resource_type, resource_name=acl.resource_name,
                                  pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host,
                                  operation=acl.operation, permission_type=acl.permission_type)
            for acl in removed]))
    return DeleteAclsResponse(filter_results=results)
