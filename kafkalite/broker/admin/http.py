"""The admin endpoint's HTTP server (aiohttp), on the broker's event loop.

Routes (``openapi.json`` is the reference; this module only maps them to ``views``, ``records``,
``faults`` and ``metrics``):

* ``GET /v1/broker``, ``/v1/topics``, ``/v1/topics/{topic}``,
  ``/v1/topics/{topic}/partitions/{partition}/records``, ``/v1/groups``, ``/v1/groups/{group}``,
  ``/v1/producers``, ``/v1/transactions``, ``/v1/connections``, ``/v1/requests`` (``DELETE``
  empties it), ``/v1/stats``;
* ``GET``/``POST``/``DELETE /v1/faults``, ``GET``/``DELETE /v1/faults/{id}``;
* ``GET /v1/openapi.json``, ``GET /metrics``, the console at ``/`` and ``/console/...``.

Errors are JSON ``{"error": "..."}`` with 400 (a bad parameter or fault) or 404. ``POST`` wants a
JSON body sent as ``application/json``: a web page of another origin cannot send that without a
CORS preflight, which this server never grants, so a browser tab cannot inject faults behind its
user's back. There is no authentication: the listener belongs on a loopback address. Every page
of the console is sent with a Content-Security-Policy that allows only this origin's own scripts.
Handlers read the broker's state directly: they run on its loop, between requests. The socket is
bound, and this module imported, by ``endpoint``.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kafkalite.broker.admin import views
from kafkalite.broker.admin.faults import FaultError, api_key_of
from kafkalite.broker.admin.metrics import CONTENT_TYPE, BrokerCollector, MetricsEndpoint
from kafkalite.broker.admin.records import browse
from kafkalite.protocol.errors import KafkaError

if TYPE_CHECKING:
    from kafkalite.broker.admin.observer import RequestObserver
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.net import KafkaConnection

__all__ = ["build_app", "start_server"]

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
MAX_LIMIT = 1000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadRequest(Exception):
    """A parameter the API cannot use: 400 with this message."""


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda value: json.dumps(value, separators=(",", ":")))


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


def _int_param(request: web.Request, name: str, default: int | None = None, low: int | None = None,
               high: int | None = None) -> int | None:
    text = request.query.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {text!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise BadRequest(f"{name} must be between {low} and {high}, got {value}")
    return value


def _bool_param(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "yes")


def _console_file(name: str) -> bytes:
    return resources.files("kafkalite.broker.admin").joinpath("console", name).read_bytes()


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of this API, as shipped in the package."""
    document: dict[str, Any] = json.loads(
        resources.files("kafkalite.broker.admin").joinpath("openapi.json").read_text("utf-8"))
    return document


@web.middleware
async def _errors_and_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except BadRequest as exc:
        response = _error(400, str(exc))
    except web.HTTPNotFound:
        response = _error(404, f"no such resource: {request.path}")
    except web.HTTPMethodNotAllowed as exc:
        response = _error(405, f"{request.method} is not allowed on {request.path} (allowed: "
                          f"{', '.join(sorted(exc.allowed_methods))})")
    response.headers.update(SECURITY_HEADERS)
    return response


def build_app(cluster: Cluster, observer: RequestObserver, connections: Iterable[KafkaConnection],
              started_ms: int | None = None) -> web.Application:
    """The aiohttp application of the admin endpoint (``AdminServer`` serves it)."""
    started = started_ms if started_ms is not None else int(time.time() * 1000)
    metrics = MetricsEndpoint(BrokerCollector(cluster, observer, connections))
    openapi = json.dumps(openapi_document()).encode()
    console = {name: _console_file(name) for name in ("index.html", "console.css", "console.js")}
    faults = observer.faults

    async def index(request: web.Request) -> web.Response:
        return web.Response(body=console["index.html"], content_type="text/html", charset="utf-8")

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in console or name == "index.html":
            raise web.HTTPNotFound()
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        return web.Response(body=console[name], content_type=kind, charset="utf-8")

    async def openapi_json(request: web.Request) -> web.Response:
        return web.Response(body=openapi, content_type="application/json")

    async def broker(request: web.Request) -> web.Response:
        return _json(views.broker_view(cluster, started))

    async def topics(request: web.Request) -> web.Response:
        internal = request.query.get("internal", "true").lower() not in ("0", "false", "no")
        return _json(views.topics_view(cluster, include_internal=internal))

    async def topic(request: web.Request) -> web.Response:
        view = views.topic_view(cluster, request.match_info["topic"])
        return _json(view) if view is not None else _error(404, f"no topic {request.match_info['topic']!r}")

    async def records(request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        try:
            index = int(request.match_info["partition"])
        except ValueError:
            raise BadRequest(f"partition must be an integer, got {request.match_info['partition']!r}") from None
        partition = cluster.topics.partition(name, index)
        if partition is None:
            return _error(404, f"no partition {index} of topic {name!r}")
        isolation = request.query.get("isolation", "read_uncommitted")
        if isolation not in ("read_uncommitted", "read_committed"):
            raise BadRequest(f"isolation must be read_uncommitted or read_committed, got {isolation!r}")
        try:
            page = browse(partition, offset=_int_param(request, "offset", low=0),
                          timestamp=_int_param(request, "timestamp", low=0),
                          limit=_int_param(request, "limit", 50, 1, MAX_LIMIT) or 50,
                          read_committed=isolation == "read_committed")
        except KafkaError as exc:
            raise BadRequest(exc.message) from None
        return _json(page)

    async def groups(request: web.Request) -> web.Response:
        return _json(views.groups_view(cluster))

    async def group(request: web.Request) -> web.Response:
        view = views.group_view(cluster, request.match_info["group"])
        return _json(view) if view is not None else _error(404, f"no group {request.match_info['group']!r}")

    async def producers(request: web.Request) -> web.Response:
        return _json(views.producers_view(cluster))

    async def transactions(request: web.Request) -> web.Response:
        return _json(views.transactions_view(cluster, open_only=_bool_param(request, "open")))

    async def connections_list(request: web.Request) -> web.Response:
        return _json(views.connections_view(connections, observer))

    async def requests_list(request: web.Request) -> web.Response:
        api_text = request.query.get("api")
        try:
            api = api_key_of(int(api_text) if api_text and api_text.isdigit() else api_text) if api_text else None
        except FaultError as exc:
            raise BadRequest(str(exc)) from None
        return _json(views.requests_view(observer, limit=_int_param(request, "limit", 100, 1, MAX_LIMIT) or 100,
                                         api=api, client_id=request.query.get("client_id"),
                                         errors_only=_bool_param(request, "errors")))

    async def requests_clear(request: web.Request) -> web.Response:
        cleared = len(observer.requests)
        observer.requests.clear()
        return _json({"cleared": cleared})

    async def stats(request: web.Request) -> web.Response:
        return _json(views.stats_view(cluster, observer, len(list(connections))))

    async def faults_list(request: web.Request) -> web.Response:
        return _json(faults.as_json())

    async def faults_add(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            raise BadRequest("send the fault as JSON with Content-Type: application/json")
        try:
            body = await request.json()
        except ValueError as exc:
            raise BadRequest(f"the body is not JSON: {exc}") from None
        try:
            fault = faults.add(body)
        except FaultError as exc:
            raise BadRequest(str(exc)) from None
        return _json(faults.as_json([fault])[0], status=201)

    async def faults_clear(request: web.Request) -> web.Response:
        return _json({"cleared": faults.clear()})

    def fault_id(request: web.Request) -> int:
        try:
            return int(request.match_info["fault_id"])
        except ValueError:
            raise BadRequest(f"a fault id is an integer, got {request.match_info['fault_id']!r}") from None

    async def fault_get(request: web.Request) -> web.Response:
        fault = faults.get(fault_id(request))
        return _json(faults.as_json([fault])[0]) if fault is not None else _error(404, "no such fault (or it expired)")

    async def fault_delete(request: web.Request) -> web.Response:
        if not faults.remove(fault_id(request)):
            return _error(404, "no such fault (or it expired)")
        return web.Response(status=204)

    async def metrics_text(request: web.Request) -> web.Response:
        response = web.Response(body=metrics.render())
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    app = web.Application(middlewares=[_errors_and_headers], client_max_size=64 * 1024)
    routes = app.router
    routes.add_get("/", index)
    routes.add_get("/console/{name}", asset)
    routes.add_get("/v1/openapi.json", openapi_json)
    routes.add_get("/v1/broker", broker)
    routes.add_get("/v1/topics", topics)
    routes.add_get("/v1/topics/{topic}", topic)
    routes.add_get("/v1/topics/{topic}/partitions/{partition}/records", records)
    routes.add_get("/v1/groups", groups)
    routes.add_get("/v1/groups/{group}", group)
    routes.add_get("/v1/producers", producers)
    routes.add_get("/v1/transactions", transactions)
    routes.add_get("/v1/connections", connections_list)
    routes.add_get("/v1/requests", requests_list)
    routes.add_delete("/v1/requests", requests_clear)
    routes.add_get("/v1/stats", stats)
    routes.add_get("/v1/faults", faults_list)
    routes.add_post("/v1/faults", faults_add)
    routes.add_delete("/v1/faults", faults_clear)
    routes.add_get("/v1/faults/{fault_id}", fault_get)
    routes.add_delete("/v1/faults/{fault_id}", fault_delete)
    routes.add_get("/metrics", metrics_text)
    return app


async def start_server(app: web.Application, sock: socket.socket) -> Callable[[], Awaitable[None]]:
    """Serve ``app`` on ``sock``, a listening socket already bound; what stops it (and closes ``sock``)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner.cleanup
