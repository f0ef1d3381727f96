"""The authorizer: may this principal, from this host, do this operation on this resource?

Kafka's StandardAuthorizer rules, in order:

1. a principal in ``super.users`` may do everything;
2. a DENY binding that applies (its pattern covers the resource, its principal is this one or
   ``User:*``, its host this one or ``*``, its operation this one or ALL) refuses, whatever allows;
3. an ALLOW binding that applies allows; DESCRIBE is also allowed by READ, WRITE, DELETE or ALTER,
   and DESCRIBE_CONFIGS by ALTER_CONFIGS;
4. when no binding at all covers the resource, ``allow.everyone.if.no.acl.found`` decides (false by
   default: refused).

IDEMPOTENT_WRITE on the cluster is also granted to a principal allowed WRITE on some topic (KIP-679).
``authorized_operations`` gives the bit set Metadata and DescribeGroups answer (bit ``1 << operation``).
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkalite.broker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourceType,
)
from kafkalite.broker.security.principal import KafkaPrincipal

__all__ = ["Authorizer", "AUTHORIZER_CLASS_NAMES", "OPERATIONS_OF"]

# authorizer.class.name values that switch ACLs on.
AUTHORIZER_CLASS_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
})

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                               AclOperation.ALTER, AclOperation.ALL})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.ALL})

# The operations each resource type has, as Kafka lists them for authorized operations.
OPERATIONS_OF: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                         AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


class Authorizer:
    """Decisions from the ACL store (see the module docstring)."""

    def __init__(self, acls: AclStore, super_users: Iterable[str], allow_if_no_acl_found: bool = False) -> None:
        self.acls = acls
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl_found = allow_if_no_acl_found

    def _applying(self, principal: KafkaPrincipal, host: str, resource_type: ResourceType,
                  name: str) -> tuple[list[AclBinding], bool]:
        """The bindings for this principal and host that cover the resource, and whether any binding
        (for anyone) covers it."""
        covering = [acl for acl in self.acls.by_type.get(resource_type, ()) if acl.applies_to(resource_type, name)]
        who = str(principal)
        return [acl for acl in covering if acl.principal in (who, "User:*") and acl.host in (host, "*")], \
            bool(covering)

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if str(principal) in self.super_users:
            return True
        applying, any_acl = self._applying(principal, host, resource_type, name)
        return self._decide(applying, any_acl, operation, principal, host, resource_type)

    def _decide(self, applying: list[AclBinding], any_acl: bool, operation: AclOperation, principal: KafkaPrincipal,
                host: str, resource_type: ResourceType) -> bool:
        for acl in applying:
            if acl.permission_type == AclPermissionType.DENY and acl.operation in (operation, AclOperation.ALL):
                return False
        allowed_by = (_IMPLIES_DESCRIBE if operation == AclOperation.DESCRIBE else
                      _IMPLIES_DESCRIBE_CONFIGS if operation == AclOperation.DESCRIBE_CONFIGS else
                      frozenset({operation, AclOperation.ALL}))
        if any(acl.permission_type == AclPermissionType.ALLOW and acl.operation in allowed_by for acl in applying):
            return True
        if operation == AclOperation.IDEMPOTENT_WRITE and resource_type == ResourceType.CLUSTER \
                and self.authorize_any(principal, host, AclOperation.WRITE, ResourceType.TOPIC):
            return True
        return not any_acl and self.allow_if_no_acl_found

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type (Kafka's
        ``authorizeByResourceType``): an ALLOW binding that no DENY of the same pattern cancels."""
        if str(principal) in self.super_users:
            return True
        who = str(principal)
        bindings = [acl for acl in self.acls.by_type.get(resource_type, ())
                    if acl.principal in (who, "User:*") and acl.host in (host, "*")
                    and acl.operation in (operation, AclOperation.ALL)]
        denied = {(acl.pattern_type, acl.resource_name) for acl in bindings
                  if acl.permission_type == AclPermissionType.DENY}
        if (PatternType.LITERAL, "*") in denied:
            return False
        for acl in bindings:
            if acl.permission_type != AclPermissionType.ALLOW:
                continue
            if (acl.pattern_type, acl.resource_name) in denied:
                continue
            if any(pattern == PatternType.PREFIXED and acl.resource_name.startswith(prefix)
                   for pattern, prefix in denied):
                continue
            return True
        return self.allow_if_no_acl_found and not self.acls.by_type.get(resource_type)

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: ResourceType,
                              name: str = CLUSTER_NAME) -> int:
        """The bit set of the operations allowed on the resource (bit ``1 << operation``)."""
        bits = 0
        for operation in OPERATIONS_OF.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits
