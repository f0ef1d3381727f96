"""DescribeAcls, CreateAcls and DeleteAcls without an authorizer: Kafka's SECURITY_DISABLED answers,
at every version served, through the codec."""

from __future__ import annotations

import pytest

from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.handlers.registry import HANDLERS
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kafkalite.protocol.messages.create_acls_request import AclCreation
from kafkalite.protocol.messages.delete_acls_request import DeleteAclsFilter
from tests.unit.test_admin_handlers import call, cluster

__all__ = ["cluster"]  # the fixture


def served(api_key: int) -> range:
    handler = HANDLERS[api_key]
    return range(handler.min_version, handler.max_version + 1)


@pytest.mark.parametrize("version", served(29))
def test_describe_acls_answers_security_disabled(cluster: Cluster, version: int) -> None:
    response = call(cluster, DescribeAclsRequest(resource_type_filter=1, operation=1, permission_type=1), version)
    assert (response.error_code, response.error_message, response.resources) == (
        ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])


@pytest.mark.parametrize("version", served(30))
def test_create_acls_answers_security_disabled_per_creation(cluster: Cluster, version: int) -> None:
    creation = AclCreation(resource_type=2, resource_name="alpha", resource_pattern_type=3, principal="User:alice",
                           host="*", operation=3, permission_type=3)
    response = call(cluster, CreateAclsRequest(creations=[creation, creation]), version)
    assert [(result.error_code, result.error_message) for result in response.results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * 2


@pytest.mark.parametrize("version", served(31))
def test_delete_acls_answers_security_disabled_per_filter(cluster: Cluster, version: int) -> None:
    response = call(cluster, DeleteAclsRequest(filters=[DeleteAclsFilter(resource_type_filter=1, operation=1,
                                                                         permission_type=1)]), version)
    assert [(result.error_code, result.error_message, result.matching_acls)
            for result in response.filter_results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.", [])]
