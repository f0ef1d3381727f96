"""CreateAcls (API key 30), v1-3: store ACL bindings in the authorizer's ACL store.

With an authorizer (``authorizer.class.name``, see ``kafkalite.broker.security``) each creation is
checked as Kafka checks it (a resource type, a LITERAL or PREFIXED pattern, an operation, ALLOW or
DENY, a ``Type:name`` principal, a host; the cluster resource is named ``kafka-cluster``): a bad one
gets INVALID_REQUEST with the reason, the others are stored (in ``acls.json`` of the data directory)
and answered NONE. Without an authorizer every creation gets SECURITY_DISABLED with Kafka's message
"No Authorizer is configured.". The principal needs ALTER on the cluster (``security.enforce``).
v0 (removed in Kafka 4) is not served.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.broker.security.acls import binding
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import CreateAclsRequest, CreateAclsResponse
from kafkalite.protocol.messages.create_acls_response import AclCreationResult

__all__ = ["NO_AUTHORIZER", "handle_create_acls"]

NO_AUTHORIZER = "No Authorizer is configured."


@handles(api_key=30, min_version=1, max_version=3)
def handle_create_acls(context: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    authorizer = None if context.session is None else context.session.authorizer
    if authorizer is None:
        return CreateAclsResponse(results=[
            AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
            for _ in request.creations])
    results, created = [], []
    for creation in request.creations:
        acl = binding(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                      creation.principal, creation.host, creation.operation, creation.permission_type)
        problem = acl.check()
        if problem is not None:
            results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem))
        else:
            created.append(acl)
            results.append(AclCreationResult(error_message=None))
    authorizer.acls.add(created)
    return CreateAclsResponse(results=results)
