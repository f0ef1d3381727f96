"""ListGroups (API key 16), v0-5: every group of this coordinator, classic, KIP-848 and share.

v4+ filter by state (case-insensitive: Empty, PreparingRebalance, CompletingRebalance, Stable for
classic groups; Empty, Assigning, Reconciling, Stable for consumer groups; Empty, Stable for share
groups) and report each group's state; v5+ filter by type ("classic", "consumer", "share") and
report it. Groups that only hold offsets (simple groups) are listed with an empty protocol type, as
in Kafka; share groups with the protocol type "share".
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import ListGroupsRequest, ListGroupsResponse
from kafkalite.protocol.messages.list_groups_response import ListedGroup

__all__ = ["handle_list_groups"]


@handles(api_key=16, min_version=0, max_version=5)
def handle_list_groups(context: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    version = context.api_version
    groups = context.cluster.group_coordinator.list_groups(
        request.states_filter if version >= 4 else (), request.types_filter if version >= 5 else ())
    return ListGroupsResponse(groups=[
        ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type, group_state=group.state,
                    group_type=group.group_type)
        for group in groups])
