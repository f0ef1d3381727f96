"""``/metrics``: the broker's metrics in Prometheus' text format, made by prometheus_client.

``BrokerCollector`` is a prometheus_client custom collector: at each scrape it reads the request
counters the observer keeps (``stats``: cheap to update on the request path, where the library's
own metric objects would take a lock per update) and the broker's state (partitions, groups,
connections, the purgatory, the event loop's lag), and yields metric families; the library writes
the exposition text. Metric names follow Prometheus' conventions (``_total`` counters, ``_seconds``
and ``_bytes`` units) under the ``kafkalite_`` prefix; labels are Kafka's names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from kafkalite import __version__
from kafkalite.broker.admin.views import api_name, error_name

if TYPE_CHECKING:
    from kafkalite.broker.admin.observer import RequestObserver
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.net import KafkaConnection

__all__ = ["CONTENT_TYPE", "BrokerCollector", "MetricsEndpoint"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
PURGATORY_APIS = (0, 1, 11, 14)  # Produce, Fetch, JoinGroup, SyncGroup: always reported, 0 when idle


class BrokerCollector:
    """Yields the broker's metric families when prometheus_client collects."""

    def __init__(self, cluster: Cluster, observer: RequestObserver, connections: Iterable[KafkaConnection]) -> None:
        self.cluster, self.observer, self.connections = cluster, observer, connections

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._partitions()
        yield from self._groups()
        yield from self._runtime()

    def _requests(self) -> Iterator[Metric]:
        request_stats = self.observer.stats
        apis = sorted(request_stats.apis.items())
        requests = CounterMetricFamily("kafkalite_requests", "Requests answered, by API and the first error code of "
                                       "the answer (NONE when it has none).", labels=["api", "error"])
        latency = HistogramMetricFamily("kafkalite_request_latency_seconds",
                                        "Time from a request's arrival to its answer being ready, by API.",
                                        labels=["api"])
        bytes_in = CounterMetricFamily("kafkalite_request_bytes", "Bytes of requests received, by API.",
                                       labels=["api"])
        bytes_out = CounterMetricFamily("kafkalite_response_bytes", "Bytes of responses written, by API.",
                                        labels=["api"])
        for key, stats in apis:
            name = api_name(key)
            for code, count in sorted(stats.errors.items()):
                requests.add_metric([name, error_name(code)], count)
            latency.add_metric([name], buckets=stats.cumulative_buckets(), sum_value=stats.latency_sum)
            bytes_in.add_metric([name], stats.bytes_in)
            bytes_out.add_metric([name], request_stats.bytes_out.get(key, 0))
        yield from (requests, latency, bytes_in, bytes_out)

    def _partitions(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        high_watermark = GaugeMetricFamily("kafkalite_partition_high_watermark", "A partition's high watermark.",
                                           labels=labels)
        log_start = GaugeMetricFamily("kafkalite_partition_log_start_offset", "A partition's log start offset.",
                                      labels=labels)
        size = GaugeMetricFamily("kafkalite_partition_size_bytes", "Bytes of a partition's segments.", labels=labels)
        segments = GaugeMetricFamily("kafkalite_partition_segments", "A partition's segment count.", labels=labels)
        for topic in sorted(self.cluster.topics, key=lambda t: t.name):
            for partition in topic.partitions:
                values = [topic.name, str(partition.index)]
                high_watermark.add_metric(values, partition.high_watermark)
                log_start.add_metric(values, partition.log_start_offset)
                size.add_metric(values, partition.log.size_bytes())
                segments.add_metric(values, partition.log.segment_count())
        yield from (high_watermark, log_start, size, segments)

    def _groups(self) -> Iterator[Metric]:
        coordinator = self.cluster.group_coordinator
        lag = GaugeMetricFamily("kafkalite_consumer_group_lag",
                                "High watermark minus the group's committed offset, per partition.",
                                labels=["group", "topic", "partition"])
        members = GaugeMetricFamily("kafkalite_consumer_group_members", "Members of a group.",
                                    labels=["group", "state"])
        for group_id in sorted(set(coordinator.groups) | set(coordinator.offsets.group_ids())):
            group = coordinator.groups.get(group_id)
            if group is not None:
                members.add_metric([group_id, group.state_name], len(group.members))
            for (topic, index), value in sorted(coordinator.offsets.committed(group_id).items()):
                partition = self.cluster.topics.partition(topic, index)
                if partition is not None and value.offset >= 0:
                    lag.add_metric([group_id, topic, str(index)], max(0, partition.high_watermark - value.offset))
        yield from (lag, members)

    def _runtime(self) -> Iterator[Metric]:
        observer = self.observer
        connections = GaugeMetricFamily("kafkalite_connections", "Open client connections.",
                                        labels=["listener"])
        by_listener: dict[str, int] = {}
        for connection in list(self.connections):
            by_listener[connection.listener_name] = by_listener.get(connection.listener_name, 0) + 1
        for listener, count in sorted(by_listener.items()):
            connections.add_metric([listener], count)
        purgatory = GaugeMetricFamily("kafkalite_purgatory_size",
                                      "Requests whose answer is waiting (long-poll Fetch, JoinGroup and SyncGroup "
                                      "barriers, Produce waiting for an fsync), by API.", labels=["api"])
        parked = dict.fromkeys(PURGATORY_APIS, 0) | observer.parked
        for key, count in sorted(parked.items()):
            purgatory.add_metric([api_name(key)], count)
        lag = GaugeMetricFamily("kafkalite_event_loop_lag_seconds",
                                "How late the event loop ran a timer at its latest sample (every 0.5 s).",
                                value=observer.loop_lag.last)
        lag_max = GaugeMetricFamily("kafkalite_event_loop_lag_max_seconds",
                                    "The largest event-loop lag sampled since the broker started.",
                                    value=observer.loop_lag.max)
        faults = GaugeMetricFamily("kafkalite_faults_active", "Injected faults in force.",
                                   value=len(observer.faults.faults()))
        info = GaugeMetricFamily("kafkalite_broker_info", "The broker's version and identity (always 1).",
                                 labels=["version", "node_id", "cluster_id"])
        info.add_metric([__version__, str(self.cluster.node_id), self.cluster.cluster_id], 1)
        yield from (connections, purgatory, lag, lag_max, faults, info)


class MetricsEndpoint:
    """A registry holding the broker's collector; ``render`` is the body of a scrape."""

    def __init__(self, collector: BrokerCollector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)
