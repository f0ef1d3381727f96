"""Fault injection for tests: ``broker.faults`` on both test brokers.

    with kafka_broker.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3):
        run_my_producer()                  # the next three Produce requests fail, then Kafka's answer again

    with kafka_broker.faults.inject(kind="leader_unavailable", topic="orders", partition=0, duration_ms=2000):
        ...
    kafka_broker.faults.requests(api="Produce")   # the recent-request log, newest first

``inject`` takes the fields of the admin API's ``POST /v1/faults`` (see ``kafkalite.broker.admin.faults``)
as keyword arguments, injects the fault at once and returns it; used as a context manager it is
removed on exit (it also expires by itself: ``duration_ms``, 60 s unless said). A fault the broker
cannot inject raises ValueError with the reason.

The in-process broker (``EmbeddedBroker``) calls its fault registry directly, on the broker's loop;
the subprocess broker (``BrokerProcess``) goes through the admin HTTP API, which it serves on a free
loopback port when the ``admin`` extra is installed. Faults do not survive a broker restart.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kafkalite.broker.admin.observer import RequestObserver

__all__ = ["Faults", "HttpFaultBackend", "InjectedFault", "ObserverFaultBackend"]

Json = dict[str, Any]
JsonList = list[Json]  # (a class with a list method cannot say list[...] in its body)
TIMEOUT_S = 10.0


class FaultBackend(Protocol):
    def inject(self, fault: Json) -> Json: ...

    def list(self) -> JsonList: ...

    def remove(self, fault_id: int) -> bool: ...

    def clear(self) -> int: ...

    def requests(self, query: Json) -> JsonList: ...


class InjectedFault:
    """A fault in force; as a context manager, removed on exit."""

    def __init__(self, faults: Faults, description: Json) -> None:
        self._faults = faults
        self.description = description  # as the broker listed it when it was injected
        self.id: int = description["id"]

    def info(self) -> Json | None:
        """The fault as the broker lists it now (None once it expired, was used up or removed)."""
        return next((fault for fault in self._faults.list() if fault["id"] == self.id), None)

    def remove(self) -> bool:
        """Remove the fault; False when it was already gone."""
        return self._faults.remove(self.id)

    def __enter__(self) -> InjectedFault:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"InjectedFault({self.description})"


class Faults:
    """A test broker's faults: ``inject``, ``list``, ``remove``, ``clear``, and the recent-request log."""

    def __init__(self, backend: FaultBackend) -> None:
        self._backend = backend

    def inject(self, **fault: Any) -> InjectedFault:
        """Inject a fault described by the admin API's fields (``api``, ``error``, ``kind``, ``count``,
        ``probability``, ``seed``, ``delay_ms``, ``duration_ms``, ``topic``, ``partition``, ``client_id``)."""
        return InjectedFault(self, self._backend.inject(fault))

    def list(self) -> JsonList:
        return self._backend.list()

    def remove(self, fault_id: int) -> bool:
        return self._backend.remove(fault_id)

    def clear(self) -> int:
        """Remove every fault; how many there were."""
        return self._backend.clear()

    def requests(self, *, limit: int = 100, api: str | None = None, client_id: str | None = None,
                 errors: bool = False) -> JsonList:
        """The broker's recent-request log, newest first (API, version, client, latency, error, fault)."""
        query: Json = {"limit": limit, "api": api, "client_id": client_id, "errors": errors or None}
        return self._backend.requests({key: value for key, value in query.items() if value is not None})


class ObserverFaultBackend:
    """Runs each call on the broker's own loop, against its request observer."""

    def __init__(self, call: Callable[[Callable[[RequestObserver], Any]], Any]) -> None:
        self._call = call  # runs a function of the observer on the broker's loop, returns its result

    def inject(self, fault: Json) -> Json:
        def add(observer: RequestObserver) -> Json:
            return observer.faults.as_json([observer.faults.add(fault)])[0]

        result: Json = self._call(add)
        return result

    def list(self) -> JsonList:
        result: JsonList = self._call(lambda observer: observer.faults.as_json())
        return result

    def remove(self, fault_id: int) -> bool:
        return bool(self._call(lambda observer: observer.faults.remove(fault_id)))

    def clear(self) -> int:
        return int(self._call(lambda observer: observer.faults.clear()))

    def requests(self, query: Json) -> JsonList:
        from kafkalite.broker.admin.faults import api_key_of
        from kafkalite.broker.admin.views import requests_view

        api = api_key_of(query["api"]) if "api" in query else None
        result: JsonList = self._call(lambda observer: requests_view(
            observer, limit=query.get("limit", 100), api=api, client_id=query.get("client_id"),
            errors_only=bool(query.get("errors"))))
        return result


class HttpFaultBackend:
    """The admin HTTP API of a broker at ``base_url`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def _call(self, method: str, path: str, body: Json | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except ValueError:
                message = exc.reason
            if exc.code == 404:
                raise LookupError(message) from None
            raise ValueError(message) from None
        return json.loads(text) if text else None

    def inject(self, fault: Json) -> Json:
        result: Json = self._call("POST", "/v1/faults", fault)
        return result

    def list(self) -> JsonList:
        result: JsonList = self._call("GET", "/v1/faults")
        return result

    def remove(self, fault_id: int) -> bool:
        try:
            self._call("DELETE", f"/v1/faults/{fault_id}")
        except LookupError:
            return False
        return True

    def clear(self) -> int:
        return int(self._call("DELETE", "/v1/faults")["cleared"])

    def requests(self, query: Json) -> JsonList:
        text = {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in query.items()}
        result: JsonList = self._call("GET", "/v1/requests?" + urllib.parse.urlencode(text))
        return result
