"""DeleteGroups (API key 42), v0-2: delete empty groups and all their committed offsets.

Per group: GROUP_ID_NOT_FOUND if there is no such group, NON_EMPTY_GROUP while it has members;
otherwise its offsets and metadata are removed (tombstones in ``__consumer_offsets``), and for a share
group its share-partition state too (tombstones in ``__share_group_state``). Group configs stay.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from kafkalite.protocol.messages.delete_groups_response import DeletableGroupResult

__all__ = ["handle_delete_groups"]


@handles(api_key=42, min_version=0, max_version=2)
def handle_delete_groups(context: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results = context.cluster.group_coordinator.delete_groups(list(dict.fromkeys(request.groups_names)))
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=group_id, error_code=results[group_id])
                                         for group_id in dict.fromkeys(request.groups_names)])
