"""ApiVersions (API key 18), v0-4: every API this broker serves, with its version range.

The list is the handler registry's table of served APIs (``registry.SERVED``, which every handler
module must agree with), so what is advertised is exactly what is served, and answering it imports
no other handler.
v3+ requests carry the client's software name and version (KIP-511); like Kafka, a value that does
not match ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` is answered with INVALID_REQUEST
(librdkafka sanitises its strings to that pattern; kafka-python and the Java client send plain
names and dotted versions). Not implemented: supported and finalized features (the lists are empty
and the finalized features epoch is -1), so Java clients stay on transactions V1.

A request at a version above 4 never reaches this handler: ``kafkalite.broker.net`` answers it in v0 format
with UNSUPPORTED_VERSION and the key list from ``api_versions_response``, as Kafka does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kafkalite.broker.handlers.registry import HANDLERS, ApiHandler, RequestContext, handles, served_versions
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafkalite.protocol.messages.api_versions_response import ApiVersion

__all__ = ["api_versions_response", "handle_api_versions", "is_valid_software_string"]

# compiled on its first use (re's own cache), by the first request of version 3 or later, not at import
_SOFTWARE_STRING = r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?"


def is_valid_software_string(value: str) -> bool:
    """Kafka's check of ``client_software_name`` / ``client_software_version``."""
    return re.fullmatch(_SOFTWARE_STRING, value) is not None


def api_versions_response(
    handlers: Mapping[int, ApiHandler] = HANDLERS, error_code: int = ErrorCode.NONE
) -> ApiVersionsResponse:
    """A response listing every registered API key with its min and max version, by API key."""
    api_keys = [ApiVersion(api_key=api_key, min_version=low, max_version=high)
                for api_key, low, high in served_versions(handlers)]
    return ApiVersionsResponse(error_code=error_code, api_keys=api_keys, throttle_time_ms=0)


@handles(api_key=18, min_version=0, max_version=4)
def handle_api_versions(context: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if context.api_version >= 3 and not (
        is_valid_software_string(request.client_software_name)
        and is_valid_software_string(request.client_software_version)
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, throttle_time_ms=0)
    return api_versions_response(HANDLERS)
