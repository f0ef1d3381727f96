"""The JSON the admin API answers: plain dicts and lists read from the broker's state, no sockets.

Each function reads the state it is given at the moment it is called (on the event loop) and
returns what ``json.dumps`` writes; ``openapi.json`` describes every shape. Names are Kafka's:
log start offset, high watermark, last stable offset, generation, member id, lag (the high
watermark minus the committed offset).
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafkalite import __version__
from kafkalite.broker.core.group.classic_group import ClassicGroup
from kafkalite.broker.core.group.consumer_group import ConsumerGroup
from kafkalite.broker.handlers.registry import HANDLERS
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages import ConsumerProtocolAssignment
from kafkalite.protocol.primitives import Reader

if TYPE_CHECKING:
    from kafkalite.broker.admin.observer import RequestObserver
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.core.partition import Partition
    from kafkalite.broker.core.topics import Topic
    from kafkalite.broker.net import KafkaConnection

__all__ = ["api_name", "broker_view", "connections_view", "error_name", "group_view", "groups_view",
           "producers_view", "requests_view", "stats_view", "topic_view", "topics_view", "transactions_view"]

Json = dict[str, Any]


def api_name(api_key: int) -> str:
    handler = HANDLERS.get(api_key)
    return handler.name if handler is not None else str(api_key)


def error_name(code: int) -> str:
    known = ErrorCode.from_code(code)
    return known.name if known.value == code else str(code)


# the broker ------------------------------------------------------------------------------------
def broker_view(cluster: Cluster, started_ms: int) -> Json:
    return {
        "node_id": cluster.node_id,
        "cluster_id": cluster.cluster_id,
        "version": __version__,
        "listeners": [{"name": e.name, "host": e.host, "port": e.port} for e in cluster.endpoints],
        "storage": cluster.config.get_str("log.storage"),
        "started_ms": started_ms,
        "uptime_s": round(time.time() - started_ms / 1000, 3),
        "topics": len(cluster.topics),
        "groups": len(cluster.group_coordinator.groups),
    }


# topics and partitions -----------------------------------------------------------------------
def partition_view(cluster: Cluster, partition: Partition) -> Json:
    log = partition.log
    return {
        "partition": partition.index,
        "leader": cluster.node_id,
        "leader_epoch": partition.leader_epoch,
        "log_start_offset": partition.log_start_offset,
        "high_watermark": partition.high_watermark,
        "last_stable_offset": partition.last_stable_offset,
        "log_end_offset": partition.log_end_offset,
        "segments": log.segment_count(),
        "size_bytes": log.size_bytes(),
        "producers": len(partition.producer_state.producers),
    }


def _topic_summary(topic: Topic) -> Json:
    partitions = topic.partitions
    return {
        "name": topic.name,
        "topic_id": str(topic.topic_id),
        "internal": topic.internal,
        "partitions": len(partitions),
        "records": sum(p.high_watermark - p.log_start_offset for p in partitions),
        "size_bytes": sum(p.log.size_bytes() for p in partitions),
    }


def topics_view(cluster: Cluster, include_internal: bool = True) -> list[Json]:
    """Every topic, by name: its partition count, records held (high watermark minus log start, summed) and size."""
    return [_topic_summary(topic) for topic in sorted(cluster.topics, key=lambda t: t.name)
            if include_internal or not topic.internal]


def topic_view(cluster: Cluster, name: str) -> Json | None:
    topic = cluster.topics.get(name)
    if topic is None:
        return None
    return {**_topic_summary(topic), "configs": dict(sorted(topic.configs.items())),
            "partition_details": [partition_view(cluster, partition) for partition in topic.partitions]}


# groups ------------------------------------------------------------------------------------------
def _decode_assignment(data: bytes) -> list[Json]:
    """A classic consumer's assignment (ConsumerProtocolAssignment, read as v0, the prefix of every version)."""
    if not data:
        return []
    try:
        reader = Reader(data)
        reader.int16()
        assignment = ConsumerProtocolAssignment.read(reader, 0)
    except (ProtocolError, ValueError, IndexError, struct.error):
        return []
    return [{"topic": item.topic, "partitions": sorted(item.partitions)} for item in assignment.assigned_partitions]


def _consumer_assignment(cluster: Cluster, assigned: Mapping[uuid.UUID, Iterable[int]]) -> list[Json]:
    return sorted(({"topic": cluster.topics.name_of(topic_id), "partitions": sorted(partitions)}
                   for topic_id, partitions in assigned.items() if partitions), key=lambda item: item["topic"])


def _offsets(cluster: Cluster, group_id: str) -> list[Json]:
    rows = []
    for (topic, index), value in sorted(cluster.group_coordinator.offsets.committed(group_id).items()):
        partition = cluster.topics.partition(topic, index)
        high_watermark = partition.high_watermark if partition is not None else None
        lag = None if high_watermark is None or value.offset < 0 else max(0, high_watermark - value.offset)
        rows.append({"topic": topic, "partition": index, "committed_offset": value.offset,
                     "high_watermark": high_watermark, "lag": lag, "metadata": value.metadata})
    return rows


def group_lag(cluster: Cluster, group_id: str) -> int | None:
    """The group's total lag over its committed partitions (None when it has committed nothing)."""
    lags = [row["lag"] for row in _offsets(cluster, group_id) if row["lag"] is not None]
    return sum(lags) if lags else None


def groups_view(cluster: Cluster) -> list[Json]:
    coordinator = cluster.group_coordinator
    rows = []
    for listed in sorted(coordinator.list_groups(), key=lambda group: group.group_id):
        group = coordinator.groups.get(listed.group_id)
        rows.append({"group_id": listed.group_id, "type": listed.group_type, "state": listed.state,
                     "protocol_type": listed.protocol_type,
                     "members": len(group.members) if group is not None else 0,
                     "lag": group_lag(cluster, listed.group_id)})
    return rows


def group_view(cluster: Cluster, group_id: str) -> Json | None:
    coordinator = cluster.group_coordinator
    group = coordinator.groups.get(group_id)
    if group is None and not coordinator.offsets.has_offsets(group_id):
        return None
    view: Json = {"group_id": group_id, "type": "classic", "state": "Empty", "protocol_type": "", "protocol": None,
                  "generation": -1, "leader": None, "members": [], "offsets": _offsets(cluster, group_id)}
    if isinstance(group, ClassicGroup):
        view.update(state=group.state_name, protocol_type=group.protocol_type or "", protocol=group.protocol_name,
                    generation=group.generation_id, leader=group.leader_id)
        view["members"] = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "client_host": m.client_host,
                            "assignment": _decode_assignment(m.assignment)} for m in group.members.values()]
    elif isinstance(group, ConsumerGroup):
        view.update(type="consumer", state=group.state_name, protocol_type="consumer", generation=group.group_epoch)
        view["members"] = [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                            "client_host": m.client_host,
                            "assignment": _consumer_assignment(cluster, m.assigned)} for m in group.members.values()]
    view["lag"] = sum(row["lag"] for row in view["offsets"] if row["lag"] is not None) if view["offsets"] else None
    return view


# producers and transactions ------------------------------------------------------------------
def producers_view(cluster: Cluster) -> list[Json]:
    """Every producer id with state in a partition (idempotent and transactional producers)."""
    rows = []
    for topic in sorted(cluster.topics, key=lambda t: t.name):
        for partition in topic.partitions:
            for entry in sorted(partition.producer_state.producers.values(), key=lambda e: e.producer_id):
                rows.append({"topic": topic.name, "partition": partition.index, "producer_id": entry.producer_id,
                             "producer_epoch": entry.epoch, "last_sequence": entry.last_seq,
                             "last_timestamp": entry.last_timestamp,
                             "current_txn_start_offset": entry.txn_first_offset})
    return rows


def transactions_view(cluster: Cluster, open_only: bool = False) -> list[Json]:
    rows = []
    for metadata in sorted(cluster.transactions.transactions(), key=lambda m: m.transactional_id):
        state = metadata.state.kafka_name
        if open_only and not metadata.partitions:
            continue
        rows.append({"transactional_id": metadata.transactional_id, "producer_id": metadata.producer_id,
                     "producer_epoch": metadata.producer_epoch, "state": state, "timeout_ms": metadata.timeout_ms,
                     "start_ms": metadata.start_ms, "last_update_ms": metadata.last_update_ms,
                     "partitions": [{"topic": topic, "partition": index}
                                    for topic, index in sorted(metadata.partitions)]})
    return rows


# connections and requests ----------------------------------------------------------------------
def connections_view(connections: Iterable[KafkaConnection], observer: RequestObserver) -> list[Json]:
    rows = []
    for connection in sorted(connections, key=lambda c: c.connection_id):
        info = observer.connections.get(connection)
        rows.append({
            "connection_id": connection.connection_id,
            "peer": connection.peer,
            "listener": connection.listener_name,
            "client_id": connection.client_id,
            "client_software_name": info.software_name if info else None,
            "client_software_version": info.software_version if info else None,
            "first_request_ms": info.connected_ms if info else None,
            "requests": info.requests if info else 0,
            "in_flight": connection.in_flight,
            "api_versions": [{"api": api_name(key), "api_key": key, "versions": sorted(versions)}
                             for key, versions in sorted(info.api_versions.items())] if info else [],
        })
    return rows


def requests_view(observer: RequestObserver, limit: int = 100, api: int | None = None,
                  client_id: str | None = None, errors_only: bool = False) -> list[Json]:
    """The most recent requests, newest first."""
    rows: list[Json] = []
    for entry in reversed(list(observer.requests)):
        if api is not None and entry.api_key != api:
            continue
        if client_id is not None and entry.client_id != client_id:
            continue
        if errors_only and not entry.error_code:
            continue
        rows.append({"time_ms": entry.time_ms, "connection_id": entry.connection_id, "peer": entry.peer,
                     "client_id": entry.client_id, "api": api_name(entry.api_key), "api_key": entry.api_key,
                     "api_version": entry.api_version, "correlation_id": entry.correlation_id,
                     "latency_ms": round(entry.latency_ms, 3), "error": error_name(entry.error_code),
                     "fault_id": entry.fault_id})
        if len(rows) >= limit:
            break
    return rows


def stats_view(cluster: Cluster, observer: RequestObserver, connections: int) -> Json:
    """Running totals, for a throughput plot: sample twice and divide by the time between."""
    requests, bytes_in, bytes_out = observer.stats.totals()
    produce = observer.stats.apis.get(0)
    fetch = observer.stats.apis.get(1)
    return {
        "time_ms": int(time.time() * 1000),
        "requests": requests,
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "produce_requests": produce.count if produce else 0,
        "fetch_requests": fetch.count if fetch else 0,
        "records": sum(p.high_watermark for topic in cluster.topics if not topic.internal for p in topic.partitions),
        "connections": connections,
        "parked": {api_name(key): count for key, count in sorted(observer.parked.items()) if count},
        "event_loop_lag_ms": round(observer.loop_lag.last * 1000, 3),
    }
