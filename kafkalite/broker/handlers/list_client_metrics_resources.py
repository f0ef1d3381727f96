"""ListClientMetricsResources (API key 74), v0: the client-metrics subscriptions that exist (KIP-714).

A subscription is a CLIENT_METRICS config resource made with IncrementalAlterConfigs (or
AlterConfigs) and gone once its last key is deleted; they are kept in the data directory
(``core.dynamic_configs``). The names are listed in order. Not implemented: v1 (Kafka 4.1's
ListConfigResources with resource types); clients pushing metrics (GetTelemetrySubscriptions and
PushTelemetry are not served), so a subscription is stored and listed, never applied.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ListClientMetricsResourcesRequest, ListClientMetricsResourcesResponse
from kafkalite.protocol.messages.list_client_metrics_resources_response import ClientMetricsResource

__all__ = ["handle_list_client_metrics_resources"]


@handles(api_key=74, min_version=0, max_version=0)
def handle_list_client_metrics_resources(context: RequestContext, request: ListClientMetricsResourcesRequest
                                         ) -> ListClientMetricsResourcesResponse:
    return ListClientMetricsResourcesResponse(
        error_code=ErrorCode.NONE,
        client_metrics_resources=[ClientMetricsResource(name=name)
                                  for name in context.cluster.dynamic_configs.client_metrics_names()])
