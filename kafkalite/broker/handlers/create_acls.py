"""CreateAcls (API key 30), v1-3: answered as Kafka answers it with no authorizer configured.

kafkalite loads no authorizer, so no ACL can be stored: as Kafka's broker does then, every
creation in the request gets SECURITY_DISABLED with the message "No Authorizer is configured.".
v0 (removed in Kafka 4) is not served. Not implemented: ACLs themselves; they come with an
authorizer.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import CreateAclsRequest, CreateAclsResponse
from kafkalite.protocol.messages.create_acls_response import AclCreationResult

__all__ = ["NO_AUTHORIZER", "handle_create_acls"]

NO_AUTHORIZER = "No Authorizer is configured."


@handles(api_key=30, min_version=1, max_version=3)
def handle_create_acls(context: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    return CreateAclsResponse(results=[
        AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
        for _ in request.creations])
