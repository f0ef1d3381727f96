"""ACL bindings, filters and their durable store.

An ACL binding allows or denies one principal, from one host (or ``*``), one operation on a resource
pattern: a resource type, a name and a pattern type, LITERAL (the name itself, or ``*`` for every
resource of the type) or PREFIXED (every name that starts with it). The numbers are Kafka's (the
enums below), so requests and responses carry them as they are.

Filters (DescribeAcls, DeleteAcls) leave out what they do not constrain: resource type ANY, pattern
type ANY (any pattern with this exact name) or MATCH (every pattern that applies to the named
resource: the literal name, the literal ``*`` and each matching prefix), a null name, principal or
host, operation ANY, permission ANY.

``AclStore`` keeps the bindings in ``<data dir>/acls.json``, written atomically at each change, as
Kafka keeps them in its metadata log; without a data directory they live as long as the process.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path

from kafkalite.broker.security.principal import KafkaPrincipal
from kafkalite.broker.security.scram import write_atomically

__all__ = ["ACLS_FILE", "AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType", "AclStore",
           "PatternType", "ResourceType", "CLUSTER_NAME", "WILDCARD"]

ACLS_FILE = "acls.json"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD = "*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern covers the resource ``name`` of ``resource_type``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)

    def check(self) -> str | None:
        """Why Kafka refuses to create this binding (None: it may be created)."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return "Resource type must be specified"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid pattern type {self.pattern_type.name}"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Invalid operation {self.operation.name}"
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"Invalid permission type {self.permission_type.name}"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not self.resource_name:
            return "Resource name must not be empty"
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            return "A PREFIXED pattern cannot be the wildcard"
        try:
            KafkaPrincipal.parse(self.principal)
        except ValueError as exc:
            return str(exc)
        if not self.host:
            return "Host must be specified (* for every host)"
        return None


def _enum(kind: type[IntEnum], value: int) -> IntEnum:
    try:
        return kind(value)
    except ValueError:
        return kind(0)


def binding(resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str, operation: int,
            permission_type: int) -> AclBinding:
    """A binding from a request's numbers (codes Kafka does not know become UNKNOWN)."""
    return AclBinding(ResourceType(_enum(ResourceType, resource_type)), resource_name,
                      PatternType(_enum(PatternType, pattern_type)), principal, host,
                      AclOperation(_enum(AclOperation, operation)),
                      AclPermissionType(_enum(AclPermissionType, permission_type)))


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def check(self) -> str | None:
        if ResourceType.UNKNOWN in (self.resource_type,) or self.pattern_type == PatternType.UNKNOWN \
                or self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN:
            return "The filter names an unknown resource type, pattern type, operation or permission"
        return None

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not (
                    (acl.pattern_type == PatternType.LITERAL and acl.resource_name in (self.resource_name, WILDCARD))
                    or (acl.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(acl.resource_name))):
                return False
        else:
            if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and acl.resource_name != self.resource_name:
                return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != AclOperation.ANY and acl.operation != self.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or acl.permission_type == self.permission_type


def binding_filter(resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
                   host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
    return AclBindingFilter(ResourceType(_enum(ResourceType, resource_type)), resource_name,
                            PatternType(_enum(PatternType, pattern_type)), principal, host,
                            AclOperation(_enum(AclOperation, operation)),
                            AclPermissionType(_enum(AclPermissionType, permission_type)))


class AclStore:
    """Every ACL binding, by resource type, durable in the data directory."""

    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else data_dir / ACLS_FILE
        self.by_type: dict[ResourceType, list[AclBinding]] = {}
        self._all: set[AclBinding] = set()

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        content = json.loads(self.path.read_text(encoding="utf-8"))
        for item in content.get("acls", []):
            self._add(binding(**item))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(sorted(self._all, key=lambda acl: (acl.resource_type, acl.resource_name, acl.pattern_type,
                                                      acl.principal, acl.host, acl.operation, acl.permission_type)))

    def __len__(self) -> int:
        return len(self._all)

    def _add(self, acl: AclBinding) -> bool:
        if acl in self._all:
            return False
        self._all.add(acl)
        self.by_type.setdefault(acl.resource_type, []).append(acl)
        return True

    def add(self, acls: list[AclBinding]) -> None:
        if any([self._add(acl) for acl in acls]):
            self.save()

    def remove_matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        removed = [acl for acl in self if acl_filter.matches(acl)]
        if removed:
            for acl in removed:
                self._all.discard(acl)
                self.by_type[acl.resource_type].remove(acl)
            self.save()
        return removed

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [acl for acl in self if acl_filter.matches(acl)]

    def save(self) -> None:
        if self.path is None:
            return
        items = [{key: int(value) if isinstance(value, IntEnum) else value for key, value in asdict(acl).items()}
                 for acl in self]
        write_atomically(self.path, json.dumps({"version": 1, "acls": items}, indent=1).encode("utf-8"))
