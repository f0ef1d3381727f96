"""The admin HTTP API over real sockets, every answer checked against its OpenAPI document.

One broker (in this process, ``admin.listener=127.0.0.1:0``) holds what the API shows: records with
JSON, markup and binary values, a consumer group with a live kafka-python member and committed
offsets, an idempotent producer's state, and a confluent-kafka transaction left open. Each request
and response goes through openapi-core's validators (the document is itself checked first), so
the document and the server cannot drift apart silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_spec_validator import validate as validate_document
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.broker.admin.http import openapi_document
from kafkalite.testing import EmbeddedBroker, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
XSS = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class AdminApi:
    """HTTP calls to the admin endpoint, each request and answer validated against the OpenAPI document."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        document = openapi_document()
        validate_document(document)
        self.openapi = OpenAPI.from_dict(document)

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             validate: bool = True) -> Answer:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": content_type} if data is not None else {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = Answer(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as exc:
            answer = Answer(exc.code, dict(exc.headers), exc.read())
        if validate:
            route, _, query = path.partition("?")
            args = dict(pair.split("=", 1) for pair in query.split("&")) if query else None
            mock_request = MockRequest(self.base_url, method.lower(), route, args=args, data=data,
                                       content_type=content_type)
            self.openapi.validate_request(mock_request)
            content = answer.headers.get("Content-Type", "application/json").split(";")[0]
            self.openapi.validate_response(mock_request, MockResponse(answer.body, answer.status,
                                                                      content_type=content))
        return answer

    def get(self, path: str) -> Any:
        answer = self.call("GET", path)
        assert answer.status == 200, answer
        return answer.json


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"admin.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": 0}) as broker:
        broker.create_topic("orders", 3)
        broker.produce("orders", [b'{"id": 1, "items": ["tea"]}', XSS.encode(), b"\xff\xfe\x00\x01"],
                       key=b"customer-1", partition=0, headers=[("trace", b"abc")])
        yield broker


@pytest.fixture(scope="module")
def api(broker: EmbeddedBroker) -> AdminApi:
    assert broker.admin_url is not None
    return AdminApi(broker.admin_url)


@pytest.fixture(scope="module")
def group_member(broker: EmbeddedBroker) -> Iterator[KafkaConsumer]:
    """A live member of group billing that read partition 0 and committed its offsets."""
    consumer = KafkaConsumer("orders", bootstrap_servers=broker.bootstrap_servers, group_id="billing",
                             client_id="billing-app", auto_offset_reset="earliest", enable_auto_commit=False)
    read: list[Any] = []
    # polls of a second: kafka-python 3 can miss a SyncGroup answer that lands as a short poll ends
    wait_for(lambda: read.extend(r for rs in consumer.poll(1000).values() for r in rs) or len(read) >= 3, 30,
             "the group member did not read the records")
    consumer.commit()
    broker.produce("orders", [b"later"], partition=0)  # one record behind: lag 1
    yield consumer
    consumer.close()


@pytest.fixture(scope="module")
def open_transaction(broker: EmbeddedBroker) -> Iterator[Producer]:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "payments-1",
                         "client.id": "payments"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("orders", b"pending", partition=2)
    producer.flush(30)
    yield producer
    producer.abort_transaction(30)


def test_the_openapi_document_is_served_and_valid(api: AdminApi) -> None:
    served = api.get("/v1/openapi.json")
    assert served == openapi_document()
    validate_document(served)
    assert {"/v1/topics", "/v1/groups", "/v1/faults", "/metrics"} <= set(served["paths"])


def test_topics_and_partitions_show_log_start_high_watermark_lso_segments_and_size(
        api: AdminApi, open_transaction: Producer) -> None:
    listed = {topic["name"]: topic for topic in api.get("/v1/topics")}
    assert listed["orders"]["partitions"] == 3 and not listed["orders"]["internal"]
    assert all(not topic["internal"] for topic in api.get("/v1/topics?internal=false"))
    partitions = api.get("/v1/topics/orders")["partition_details"]
    assert partitions[0]["log_start_offset"] == 0 and partitions[0]["high_watermark"] >= 3
    assert partitions[0]["segments"] == 1 and partitions[0]["size_bytes"] > 0
    open_partition = partitions[2]
    assert open_partition["last_stable_offset"] < open_partition["high_watermark"]  # the open transaction
    assert api.call("GET", "/v1/topics/nope").status == 404


def test_records_are_shown_as_text_json_or_base64_from_an_offset_or_a_timestamp(api: AdminApi) -> None:
    page = api.get("/v1/topics/orders/partitions/0/records?limit=3")
    values = [record["value"] for record in page["records"]]
    assert values[0]["json"] and json.loads(values[0]["text"]) == {"id": 1, "items": ["tea"]}
    assert values[1]["text"] == XSS and not values[1]["json"]
    assert values[2]["text"] is None and values[2]["base64"] == "//4AAQ=="
    assert page["records"][0]["key"]["text"] == "customer-1"
    assert page["records"][0]["headers"] == [{"key": "trace", "value": {
        "size": 3, "truncated": False, "text": "abc", "base64": None, "json": False}}]
    assert page["next_offset"] == 3
    assert [r["offset"] for r in api.get("/v1/topics/orders/partitions/0/records?offset=1&limit=1")["records"]] == [1]
    first_time = page["records"][0]["timestamp"]
    assert api.get(f"/v1/topics/orders/partitions/0/records?timestamp={first_time}")["records"][0]["offset"] == 0
    assert api.call("GET", "/v1/topics/orders/partitions/0/records?offset=999").status == 400
    assert api.call("GET", "/v1/topics/orders/partitions/7/records").status == 404


def test_groups_show_state_members_assignments_and_lag(api: AdminApi, group_member: KafkaConsumer) -> None:
    (listed,) = [group for group in api.get("/v1/groups") if group["group_id"] == "billing"]
    assert (listed["state"], listed["members"], listed["lag"]) == ("Stable", 1, 1)
    group = api.get("/v1/groups/billing")
    (member,) = group["members"]
    assert member["client_id"] == "billing-app"
    assert member["assignment"] == [{"topic": "orders", "partitions": [0, 1, 2]}]
    lag = {row["partition"]: row["lag"] for row in group["offsets"]}
    assert lag[0] == 1
    assert api.call("GET", "/v1/groups/nobody").status == 404


def test_producers_and_open_transactions(api: AdminApi, open_transaction: Producer) -> None:
    producers = api.get("/v1/producers")
    assert any(row["partition"] == 2 and row["current_txn_start_offset"] >= 0 for row in producers)
    (transaction,) = [t for t in api.get("/v1/transactions?open=true") if t["transactional_id"] == "payments-1"]
    assert transaction["state"] == "Ongoing"
    assert transaction["partitions"] == [{"topic": "orders", "partition": 2}]


def test_connections_name_the_client_software_and_the_api_versions_it_used(
        api: AdminApi, group_member: KafkaConsumer, open_transaction: Producer) -> None:
    connections = api.get("/v1/connections")
    software = {row["client_software_name"] for row in connections}
    assert "confluent-kafka-python" in software or "librdkafka" in software
    (payments,) = [row for row in connections if row["client_id"] == "payments"
                   and any(v["api"] == "Produce" for v in row["api_versions"])]
    assert payments["requests"] > 0 and payments["in_flight"] >= 0


def test_the_recent_request_log_filters_by_api_client_and_errors(api: AdminApi, broker: EmbeddedBroker) -> None:
    broker.produce("orders", [b"logged"])
    logged = api.get("/v1/requests?api=Produce&client_id=kafkalite-testing&limit=5")
    assert logged and all(row["api"] == "Produce" and row["client_id"] == "kafkalite-testing" for row in logged)
    assert logged[0]["time_ms"] >= logged[-1]["time_ms"] and logged[0]["latency_ms"] >= 0
    assert all(row["error"] != "NONE" for row in api.get("/v1/requests?errors=true"))
    assert api.call("GET", "/v1/requests?api=Nope").status == 400
    stats = api.get("/v1/stats")
    assert stats["produce_requests"] >= 1 and stats["records"] >= 4


def test_faults_are_injected_listed_and_cleared_over_http(api: AdminApi, broker: EmbeddedBroker) -> None:
    created = api.call("POST", "/v1/faults", {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2})
    assert created.status == 201
    fault = created.json
    assert (fault["kind"], fault["remaining"], fault["expires_in_ms"] > 0) == ("error", 2, True)
    assert [f["id"] for f in api.get("/v1/faults")] == [fault["id"]]
    assert api.get(f"/v1/faults/{fault['id']}")["api"] == "Produce"
    broker.produce("orders", [b"retried"], partition=1)  # the bundled producer retries twice
    assert api.get("/v1/faults") == []  # used up
    errors = [row for row in api.get("/v1/requests?api=Produce&limit=3") if row["fault_id"] == fault["id"]]
    assert [row["error"] for row in errors] == ["NOT_LEADER_OR_FOLLOWER"] * 2
    second = api.call("POST", "/v1/faults", {"kind": "latency", "api": "Fetch", "delay_ms": 5}).json
    assert api.call("DELETE", f"/v1/faults/{second['id']}").status == 204
    assert api.call("DELETE", f"/v1/faults/{second['id']}").status == 404
    api.call("POST", "/v1/faults", {"kind": "drop_before", "api": "DescribeGroups"})
    assert api.call("DELETE", "/v1/faults").json == {"cleared": 1}


def test_a_fault_the_broker_cannot_inject_is_a_400_with_the_reason(api: AdminApi) -> None:
    refused = api.call("POST", "/v1/faults", {"api": "Produce", "error": "NO_SUCH"}, validate=False)
    assert refused.status == 400 and "unknown error" in refused.json["error"]
    refused = api.call("POST", "/v1/faults", {"api": "Produce"}, validate=False)
    assert refused.status == 400 and "kind is missing" in refused.json["error"]
    not_json = api.call("POST", "/v1/faults", b"api=Produce", content_type="text/plain", validate=False)
    assert not_json.status == 400 and "application/json" in not_json.json["error"]
    assert api.call("GET", "/v1/faults/abc", validate=False).status == 400


def test_metrics_are_prometheus_text_with_requests_latency_partitions_lag_purgatory_and_loop_lag(
        api: AdminApi, broker: EmbeddedBroker, group_member: KafkaConsumer) -> None:
    broker.produce("orders", [b"counted"])
    answer = api.call("GET", "/metrics")
    assert answer.headers["Content-Type"].startswith("text/plain")
    families = {family.name: family for family in text_string_to_metric_families(answer.body.decode())}
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in families.values() for sample in family.samples}
    assert samples[("kafkalite_requests_total", (("api", "Produce"), ("error", "NONE")))] >= 1
    assert families["kafkalite_request_latency_seconds"].type == "histogram"
    assert samples[("kafkalite_request_latency_seconds_count", (("api", "Produce"),))] >= 1
    assert samples[("kafkalite_request_bytes_total", (("api", "Produce"),))] > 0
    assert samples[("kafkalite_response_bytes_total", (("api", "Produce"),))] > 0
    assert samples[("kafkalite_partition_high_watermark", (("partition", "0"), ("topic", "orders")))] >= 4
    assert samples[("kafkalite_partition_size_bytes", (("partition", "0"), ("topic", "orders")))] > 0
    assert ("kafkalite_consumer_group_lag", (("group", "billing"), ("partition", "0"), ("topic", "orders"))) in samples
    assert ("kafkalite_purgatory_size", (("api", "Fetch"),)) in samples
    assert ("kafkalite_purgatory_size", (("api", "JoinGroup"),)) in samples
    assert samples[("kafkalite_connections", (("listener", "PLAINTEXT"),))] >= 1
    assert "kafkalite_event_loop_lag_seconds" in families


def test_the_console_is_served_with_a_content_security_policy_and_unknown_paths_are_json_404s(
        api: AdminApi) -> None:
    page = api.call("GET", "/", validate=False)
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    missing = api.call("GET", "/v1/nothing-here", validate=False)
    assert missing.status == 404 and "no such resource" in missing.json["error"]
    assert api.call("PUT", "/v1/faults", {"x": 1}, validate=False).status == 405


def test_a_broker_without_admin_listener_imports_no_http_library() -> None:
    code = ("import sys; from kafkalite.testing import EmbeddedBroker\n"
            "with EmbeddedBroker() as broker:\n"
            "    broker.create_topic('t', 1)\n"
            "    loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'prometheus_client')"
            " or m.startswith('kafkalite.broker.admin'))\n"
            "    print(loaded, broker.server.observer)\n")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}).stdout.strip()
    assert output == "[] None"


def test_a_taken_admin_port_is_a_clear_start_failure(broker: EmbeddedBroker) -> None:
    port = broker.admin_url.rsplit(":", 1)[1]
    began = time.monotonic()
    with pytest.raises(OSError):
        EmbeddedBroker({"admin.listener": f"127.0.0.1:{port}"}).start()
    print(f"\nrefused in {time.monotonic() - began:.2f} s")
