"""DeleteAcls (API key 31), v1-3: answered as Kafka answers it with no authorizer configured.

kafkalite loads no authorizer, so there is no ACL to delete: as Kafka's broker does then, every
filter in the request gets SECURITY_DISABLED with the message "No Authorizer is configured." and
no matching ACLs. v0 (removed in Kafka 4) is not served. Not implemented: ACLs themselves; they
come with an authorizer.
"""

from __future__ import annotations

from kafkalite.broker.handlers.create_acls import NO_AUTHORIZER
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from kafkalite.protocol.messages.delete_acls_response import DeleteAclsFilterResult

__all__ = ["handle_delete_acls"]


@handles(api_key=31, min_version=1, max_version=3)
def handle_delete_acls(context: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[
        DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])
        for _ in request.filters])
