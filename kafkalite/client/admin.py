"""The asyncio admin client: topics, configs, the cluster, groups and their offsets, records, producers.

::

    async with Admin({"bootstrap.servers": "localhost:9092"}) as admin:
        results = await admin.create_topics([NewTopic("events", num_partitions=3)])
        results["events"].raise_for_error()
        offsets = await admin.list_offsets({TopicPartition("events", 0): OffsetSpec.LATEST})

Each request goes where Kafka wants it: topic changes to the controller (any broker forwards them),
partition-level requests (ListOffsets, DeleteRecords, DescribeProducers) to each partition's leader,
group requests to the group's coordinator, transaction descriptions to each transactional id's
coordinator, listings to every broker. Errors that say "ask again" (a lost connection, NOT_CONTROLLER,
NOT_COORDINATOR, stale metadata, a coordinator still loading) are retried with back-off within
``default.api.timeout.ms``; every other error is reported for its resource (see :mod:`.admin_types`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kafkalite.client.admin_types import (
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigResult,
    DeleteRecordsResult,
    GroupDescription,
    GroupListing,
    ListOffsetsResult,
    MemberDescription,
    NewTopic,
    OffsetAndMetadata,
    PartitionProducers,
    ProducerStateInfo,
    ResourceResult,
    TopicDescription,
    TopicResult,
    TransactionDescription,
    TransactionListing,
)
from kafkalite.client.config import AdminConfig, parse_config
from kafkalite.client.errors import KafkaTimeoutError, error_for
from kafkalite.client.metadata import BrokerInfo, PartitionInfo, TopicPartition, is_stale_metadata_error
from kafkalite.client.network import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, NetworkClient, monotonic_ms
from kafkalite.protocol import messages as m
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages import create_topics_request as create_topics
from kafkalite.protocol.messages import delete_records_request as delete_records
from kafkalite.protocol.messages import describe_configs_request as describe_configs
from kafkalite.protocol.messages import incremental_alter_configs_request as incremental
from kafkalite.protocol.messages import list_offsets_request as list_offsets
from kafkalite.protocol.messages import offset_commit_request as offset_commit
from kafkalite.protocol.messages import offset_delete_request as offset_delete
from kafkalite.protocol.messages import offset_fetch_request as offset_fetch
from kafkalite.protocol.messages.alter_configs_request import AlterableConfig, AlterConfigsResource
from kafkalite.protocol.messages.alter_user_scram_credentials_request import ScramCredentialDeletion as ScramDeletion
from kafkalite.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialUpsertion as ScramUpsertion,
)
from kafkalite.protocol.messages.create_partitions_request import CreatePartitionsTopic
from kafkalite.protocol.messages.delete_topics_request import DeleteTopicState
from kafkalite.protocol.messages.describe_producers_request import TopicRequest
from kafkalite.protocol.messages.describe_user_scram_credentials_request import UserName as DescribeScramUser
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic

__all__ = ["Admin"]

_T = TypeVar("_T")
_RETRY = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.THROTTLING_QUOTA_EXCEEDED})


class _Retry(Exception):
    """Raised inside an attempt to ask again (after back-off) while time is left."""

    def __init__(self, code: ErrorCode) -> None:
        self.code = code


_SCRAM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


def _error(code: int, message: str | None, context: str) -> KafkaError | None:
    return None if code == ErrorCode.NONE else error_for(code, message or None, context=context)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic_partition in partitions:
        topics.setdefault(topic_partition.topic, []).append(topic_partition.partition)
    return topics


class Admin:
    """The asyncio admin client. ``Admin(config_dict, **keywords)`` with Kafka's config keys."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        self.config = parse_config(AdminConfig, config, **keywords)
        self._client: NetworkClient | None = None

    async def start(self) -> None:
        if self._client is None:
            client = NetworkClient(self.config, allow_auto_topic_creation=False)
            await client.start(self.config.default_api_timeout_ms)
            self._client = client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    @property
    def client(self) -> NetworkClient:
        if self._client is None:
            raise RuntimeError("call start() (or use `async with`) first")
        return self._client

    # --- plumbing ------------------------------------------------------------------------------------

    async def _with_retries(self, attempt: Callable[[], Awaitable[_T]], what: str,
                            timeout_ms: int | None = None) -> _T:
        await self.start()
        deadline = monotonic_ms() + (timeout_ms if timeout_ms is not None else self.config.default_api_timeout_ms)
        tries = 0
        while True:
            try:
                return await attempt()
            except _Retry as retry:
                last = f"{retry.code.name}"
                if is_stale_metadata_error(retry.code) or retry.code is ErrorCode.NOT_CONTROLLER:
                    self.client.request_metadata_update()
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last = str(exc)
            except (OSError, ProtocolError) as exc:
                last = str(exc)
            tries += 1
            if monotonic_ms() >= deadline or tries > self.config.retries:
                raise KafkaTimeoutError(f"{what} did not succeed within default.api.timeout.ms: {last}")
            await asyncio.sleep(min(self.config.retry_backoff_ms * 2 ** min(tries - 1, 5),
                                    self.config.retry_backoff_max_ms, max(1.0, deadline - monotonic_ms())) / 1000)

    async def _leaders(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """Partitions grouped by leader; metadata is fetched for unknown topics."""
        client = self.client
        partitions = list(partitions)
        topics = {topic_partition.topic for topic_partition in partitions}
        if any(client.metadata.partition_count(topic) is None for topic in topics):
            await client.refresh_metadata(topics)
        grouped: dict[int, list[TopicPartition]] = {}
        for topic_partition in partitions:
            leader = client.metadata.leader_for(topic_partition)
            grouped.setdefault(-1 if leader is None else leader, []).append(topic_partition)
        return grouped

    # --- topics --------------------------------------------------------------------------------------

    async def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False,
                            timeout_ms: int | None = None) -> dict[str, TopicResult]:
        """Create topics; one :class:`TopicResult` per name."""
        request = m.CreateTopicsRequest(
            topics=[create_topics.CreatableTopic(
                name=topic.name, num_partitions=topic.num_partitions if not topic.replica_assignment else -1,
                replication_factor=topic.replication_factor if not topic.replica_assignment else -1,
                assignments=[create_topics.CreatableReplicaAssignment(index, list(brokers))
                             for index, brokers in sorted((topic.replica_assignment or {}).items())],
                configs=[create_topics.CreatableTopicConfig(key, str(value)) for key, value in topic.configs.items()])
                for topic in topics],
            timeout_ms=timeout_ms or self.config.request_timeout_ms, validate_only=validate_only)

        async def attempt() -> dict[str, TopicResult]:
            response: m.CreateTopicsResponse = await self.client.send_to_controller(request)
            if any(result.error_code == ErrorCode.NOT_CONTROLLER for result in response.topics):
                raise _Retry(ErrorCode.NOT_CONTROLLER)
            return {result.name: TopicResult(
                result.name, _error(result.error_code, result.error_message, f"topic {result.name!r}"),
                result.topic_id, result.num_partitions, result.replication_factor) for result in response.topics}

        results = await self._with_retries(attempt, "CreateTopics")
        self.client.request_metadata_update()
        return results

    async def delete_topics(self, names: Sequence[str], *, timeout_ms: int | None = None) -> dict[str, TopicResult]:
        async def attempt() -> dict[str, TopicResult]:
            version = (await self.client.any_connection()).version_for(m.DeleteTopicsRequest)
            request = m.DeleteTopicsRequest(timeout_ms=timeout_ms or self.config.request_timeout_ms)
            if version >= 6:
                request.topics = [DeleteTopicState(name=name) for name in names]
            else:
                request.topic_names = list(names)
            response: m.DeleteTopicsResponse = await self.client.send_to_controller(request)
            if any(result.error_code == ErrorCode.NOT_CONTROLLER for result in response.responses):
                raise _Retry(ErrorCode.NOT_CONTROLLER)
            return {result.name or "": TopicResult(
                result.name or "", _error(result.error_code, result.error_message, f"topic {result.name!r}"),
                result.topic_id) for result in response.responses}

        results = await self._with_retries(attempt, "DeleteTopics")
        self.client.metadata.forget_topics(name for name, result in results.items() if result.error is None)
        return results

    async def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False,
                                timeout_ms: int | None = None) -> dict[str, ResourceResult]:
        """Raise topics' partition counts to the given totals."""
        request = m.CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=name, count=count, assignments=None)
                    for name, count in new_counts.items()],
            timeout_ms=timeout_ms or self.config.request_timeout_ms, validate_only=validate_only)

        async def attempt() -> dict[str, ResourceResult]:
            response: m.CreatePartitionsResponse = await self.client.send_to_controller(request)
            if any(result.error_code == ErrorCode.NOT_CONTROLLER for result in response.results):
                raise _Retry(ErrorCode.NOT_CONTROLLER)
            return {result.name: ResourceResult(result.name, _error(result.error_code, result.error_message,
                                                                     f"topic {result.name!r}"))
                    for result in response.results}

        results = await self._with_retries(attempt, "CreatePartitions")
        self.client.request_metadata_update()
        return results

    async def list_topics(self, *, include_internal: bool = False) -> dict[str, int]:
        """Every topic with its partition count."""
        await self.start()
        await self.client.refresh_metadata(all_topics=True)
        return {name: len(info.partitions) for name, info in self.client.metadata.topics.items()
                if info.error is ErrorCode.NONE and (include_internal or not info.is_internal)}

    async def describe_topics(self, names: Sequence[str] | None = None, *,
                              include_internal: bool = False) -> dict[str, TopicDescription]:
        """Topics with each partition's leader, replicas and in-sync replicas (``None``: every topic).

        One Metadata request of its own (the client's metadata cache is left as it is). A topic still
        being created (LEADER_NOT_AVAILABLE) is asked for again within ``default.api.timeout.ms``; a
        missing one has UNKNOWN_TOPIC_OR_PARTITION as its error. Named topics come back in the order
        asked, every topic sorted by name (internal ones only with ``include_internal``).
        """
        wanted = None if names is None else list(dict.fromkeys(names))

        async def attempt() -> dict[str, TopicDescription]:
            connection = await self.client.any_connection()
            request = m.MetadataRequest(
                topics=None if wanted is None else [MetadataRequestTopic(name=name) for name in wanted],
                allow_auto_topic_creation=False)
            response: m.MetadataResponse = await connection.send(
                request, connection.version_for(m.MetadataRequest, min_version=1))
            found: dict[str, TopicDescription] = {}
            for topic in response.topics:
                code = ErrorCode.from_code(topic.error_code)
                if topic.name is None or (wanted is None and topic.is_internal and not include_internal):
                    continue
                if code is ErrorCode.LEADER_NOT_AVAILABLE:
                    raise _Retry(code)
                partitions = tuple(PartitionInfo(
                    partition.partition_index, partition.leader_id, partition.leader_epoch,
                    tuple(partition.replica_nodes), tuple(partition.isr_nodes), tuple(partition.offline_replicas),
                    ErrorCode.from_code(partition.error_code))
                    for partition in sorted(topic.partitions, key=lambda item: item.partition_index))
                found[topic.name] = TopicDescription(
                    topic.name, _error(code, None, f"topic {topic.name!r}"),
                    None if topic.topic_id.int == 0 else topic.topic_id, topic.is_internal, partitions)
            if wanted is None:
                return dict(sorted(found.items()))
            return {name: found.get(name) or TopicDescription(
                name, error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=f"topic {name!r}")) for name in wanted}

        return await self._with_retries(attempt, "Metadata")

    # --- configs -------------------------------------------------------------------------------------

    def _config_target(self, resource: ConfigResource) -> int | None:
        if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and resource.name:
            return int(resource.name)
        return None

    async def _per_target(self, resources: Iterable[ConfigResource],
                          send: Callable[[int | None, list[ConfigResource]], Awaitable[dict[ConfigResource, _T]]],
                          what: str) -> dict[ConfigResource, _T]:
        groups: dict[int | None, list[ConfigResource]] = {}
        for resource in resources:
            groups.setdefault(self._config_target(resource), []).append(resource)
        results: dict[ConfigResource, _T] = {}
        for node_id, group in groups.items():
            async def attempt(node_id: int | None = node_id, group: list[ConfigResource] = group
                              ) -> dict[ConfigResource, _T]:
                return await send(node_id, group)

            results.update(await self._with_retries(attempt, what))
        return results

    async def _send_to(self, node_id: int | None, request: Any) -> Any:
        if node_id is None:
            return await self.client.send_any(request)
        return await self.client.send(node_id, request)

    async def describe_configs(self, resources: Sequence[ConfigResource], *, keys: Sequence[str] | None = None,
                               include_synonyms: bool = False,
                               include_documentation: bool = False) -> dict[ConfigResource, ConfigResult]:
        async def send(node_id: int | None, group: list[ConfigResource]) -> dict[ConfigResource, ConfigResult]:
            request = m.DescribeConfigsRequest(
                resources=[describe_configs.DescribeConfigsResource(resource.type, resource.name,
                                                                    None if keys is None else list(keys))
                           for resource in group],
                include_synonyms=include_synonyms, include_documentation=include_documentation)
            response: m.DescribeConfigsResponse = await self._send_to(node_id, request)
            results = {}
            for result in response.results:
                resource = ConfigResource(ConfigResourceType(result.resource_type), result.resource_name)
                entries = {entry.name: ConfigEntry(
                    entry.name, entry.value, entry.config_source, entry.is_default, entry.read_only,
                    entry.is_sensitive, tuple((item.name, item.value, item.source) for item in entry.synonyms),
                    entry.documentation) for entry in result.configs}
                results[resource] = ConfigResult(resource, _error(result.error_code, result.error_message,
                                                                  f"{resource.type.name} {resource.name!r}"), entries)
            return results

        return await self._per_target(resources, send, "DescribeConfigs")

    async def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                            validate_only: bool = False) -> dict[ConfigResource, ResourceResult]:
        """Replace resources' whole set of overrides (Kafka's legacy AlterConfigs)."""
        async def send(node_id: int | None, group: list[ConfigResource]) -> dict[ConfigResource, ResourceResult]:
            request = m.AlterConfigsRequest(
                resources=[AlterConfigsResource(resource.type, resource.name,
                                                [AlterableConfig(key, str(value))
                                                 for key, value in configs[resource].items()])
                           for resource in group], validate_only=validate_only)
            response: m.AlterConfigsResponse = await self._send_to(node_id, request)
            return self._alter_results(response.responses)

        return await self._per_target(configs, send, "AlterConfigs")

    async def incremental_alter_configs(
            self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp] | Mapping[str, str | None]], *,
            validate_only: bool = False) -> dict[ConfigResource, ResourceResult]:
        """Change single keys: a mapping ``{key: value}`` sets (``None`` deletes), or :class:`AlterConfigOp` s."""
        def operations(resource: ConfigResource) -> list[AlterConfigOp]:
            given = changes[resource]
            if isinstance(given, Mapping):
                return [AlterConfigOp(key, value, AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET)
                        for key, value in given.items()]
            return list(given)

        async def send(node_id: int | None, group: list[ConfigResource]) -> dict[ConfigResource, ResourceResult]:
            request = m.IncrementalAlterConfigsRequest(
                resources=[incremental.AlterConfigsResource(
                    resource.type, resource.name,
                    [incremental.AlterableConfig(op.name, int(op.op), op.value) for op in operations(resource)])
                    for resource in group], validate_only=validate_only)
            response: m.IncrementalAlterConfigsResponse = await self._send_to(node_id, request)
            return self._alter_results(response.responses)

        return await self._per_target(changes, send, "IncrementalAlterConfigs")

    @staticmethod
    def _alter_results(responses: Iterable[Any]) -> dict[ConfigResource, ResourceResult]:
        results = {}
        for result in responses:
            resource = ConfigResource(ConfigResourceType(result.resource_type), result.resource_name)
            results[resource] = ResourceResult(result.resource_name, _error(
                result.error_code, result.error_message, f"{resource.type.name} {resource.name!r}"))
        return results

    # --- the cluster ---------------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        async def attempt() -> ClusterDescription:
            connection = await self.client.any_connection()
            if connection.supports(m.DescribeClusterRequest):
                response: m.DescribeClusterResponse = await connection.send(m.DescribeClusterRequest(endpoint_type=1))
                if response.error_code != ErrorCode.NONE:
                    raise error_for(response.error_code, response.error_message, context="DescribeCluster")
                return ClusterDescription(response.cluster_id, response.controller_id, tuple(
                    BrokerInfo(broker.broker_id, broker.host, broker.port, broker.rack)
                    for broker in response.brokers))
            await self.client.refresh_metadata()
            metadata = self.client.metadata
            return ClusterDescription(metadata.cluster_id, metadata.controller_id, tuple(metadata.brokers.values()))

        return await self._with_retries(attempt, "DescribeCluster")

    # --- groups --------------------------------------------------------------------------------------

    async def _group_request(self, group_id: str, request: Any, group_error: Callable[[Any], int], what: str,
                             max_version: int | None = None) -> Any:
        async def attempt() -> Any:
            node_id = await self.client.coordinator(COORDINATOR_GROUP, group_id)
            response = await self.client.send(node_id, request, max_version=max_version)
            code = ErrorCode.from_code(group_error(response))
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.client.forget_coordinator(COORDINATOR_GROUP, group_id)
            if code in _RETRY:
                raise _Retry(code)
            return response

        return await self._with_retries(attempt, f"{what} of group {group_id!r}")

    async def list_groups(self, *, states: Sequence[str] | None = None,
                          types: Sequence[str] | None = None) -> list[GroupListing]:
        """Every group of every broker (filtered by state and type where the brokers support it)."""
        await self.start()
        await self.client.refresh_metadata()
        listings: dict[str, GroupListing] = {}
        for node_id in list(self.client.metadata.brokers):
            async def attempt(node_id: int = node_id) -> m.ListGroupsResponse:
                response: m.ListGroupsResponse = await self.client.send(
                    node_id, m.ListGroupsRequest(states_filter=list(states or ()), types_filter=list(types or ())))
                if response.error_code in _RETRY:
                    raise _Retry(ErrorCode.from_code(response.error_code))
                if response.error_code != ErrorCode.NONE:
                    raise error_for(response.error_code, context=f"ListGroups at broker {node_id}")
                return response

            response = await self._with_retries(attempt, "ListGroups")
            for group in response.groups:
                listings[group.group_id] = GroupListing(group.group_id, group.protocol_type, group.group_state,
                                                        group.group_type)
        return sorted(listings.values(), key=lambda listing: listing.group_id)

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        results = {}
        for group_id in group_ids:
            response: m.DescribeGroupsResponse = await self._group_request(
                group_id, m.DescribeGroupsRequest(groups=[group_id]), lambda r: r.groups[0].error_code,
                "DescribeGroups")
            group = response.groups[0]
            members = tuple(MemberDescription(
                member.member_id, member.group_instance_id, member.client_id, member.client_host,
                _assignment(member.member_assignment) if group.protocol_type == "consumer" else ())
                for member in group.members)
            results[group_id] = GroupDescription(
                group.group_id, _error(group.error_code, None, f"group {group_id!r}"), group.group_state,
                group.protocol_type, group.protocol_data, members)
        return results

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ResourceResult]:
        results = {}
        for group_id in group_ids:
            response: m.DeleteGroupsResponse = await self._group_request(
                group_id, m.DeleteGroupsRequest(groups_names=[group_id]), lambda r: r.results[0].error_code,
                "DeleteGroups")
            results[group_id] = ResourceResult(group_id, _error(response.results[0].error_code, None,
                                                                f"group {group_id!r}"))
        return results

    async def list_consumer_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None = None,
                                          *, require_stable: bool = False) -> dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets (all of them, or those of ``partitions``)."""
        topics = None if partitions is None else [offset_fetch.OffsetFetchRequestTopic(name, indexes)
                                                  for name, indexes in _by_topic(partitions).items()]
        request = m.OffsetFetchRequest(group_id=group_id, topics=topics, require_stable=require_stable)
        # v8+ has the many-groups layout; one group fits the classic one (served by every Kafka since 2.x)
        response: m.OffsetFetchResponse = await self._group_request(
            group_id, request, lambda r: r.error_code, "OffsetFetch", max_version=7)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, context=f"offsets of group {group_id!r}")
        offsets = {}
        for topic in response.topics:
            for partition in topic.partitions:
                if partition.error_code != ErrorCode.NONE:
                    raise error_for(partition.error_code, context=f"offset of {topic.name}-{partition.partition_index}")
                if partition.committed_offset >= 0:
                    offsets[TopicPartition(topic.name, partition.partition_index)] = OffsetAndMetadata(
                        partition.committed_offset, partition.metadata, partition.committed_leader_epoch)
        return offsets

    async def alter_consumer_group_offsets(
            self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> dict[TopicPartition, ResourceResult]:
        """Commit offsets for a group without members (as ``kafka-consumer-groups --reset-offsets`` does)."""
        topics: dict[str, list[offset_commit.OffsetCommitRequestPartition]] = {}
        for topic_partition, value in offsets.items():
            entry = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            topics.setdefault(topic_partition.topic, []).append(offset_commit.OffsetCommitRequestPartition(
                partition_index=topic_partition.partition, committed_offset=entry.offset,
                committed_leader_epoch=entry.leader_epoch, committed_metadata=entry.metadata))
        request = m.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                        topics=[offset_commit.OffsetCommitRequestTopic(name, partitions)
                                                for name, partitions in topics.items()])
        response: m.OffsetCommitResponse = await self._group_request(
            group_id, request, lambda r: next((p.error_code for t in r.topics for p in t.partitions), 0),
            "OffsetCommit")
        return {TopicPartition(topic.name, partition.partition_index): ResourceResult(
            f"{topic.name}-{partition.partition_index}",
            _error(partition.error_code, None, f"group {group_id!r} {topic.name}-{partition.partition_index}"))
            for topic in response.topics for partition in topic.partitions}

    async def delete_consumer_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                                            ) -> dict[TopicPartition, ResourceResult]:
        request = m.OffsetDeleteRequest(group_id=group_id, topics=[
            offset_delete.OffsetDeleteRequestTopic(name, [offset_delete.OffsetDeleteRequestPartition(index)
                                                          for index in indexes])
            for name, indexes in _by_topic(partitions).items()])
        response: m.OffsetDeleteResponse = await self._group_request(
            group_id, request, lambda r: r.error_code, "OffsetDelete")
        if response.error_code != ErrorCode.NONE:
            error = error_for(response.error_code, context=f"group {group_id!r}")
            return {topic_partition: ResourceResult(str(topic_partition), error) for topic_partition in partitions}
        return {TopicPartition(topic.name, partition.partition_index): ResourceResult(
            f"{topic.name}-{partition.partition_index}",
            _error(partition.error_code, None, f"group {group_id!r} {topic.name}-{partition.partition_index}"))
            for topic in response.topics for partition in topic.partitions}

    # --- partitions ----------------------------------------------------------------------------------

    async def _per_leader(self, partitions: Iterable[TopicPartition],
                          send: Callable[[int, list[TopicPartition]], Awaitable[dict[TopicPartition, _T]]],
                          missing: Callable[[KafkaError], _T], what: str) -> dict[TopicPartition, _T]:
        results: dict[TopicPartition, _T] = {}
        pending = list(partitions)

        async def attempt() -> dict[TopicPartition, _T]:
            nonlocal pending
            grouped = await self._leaders(pending)
            retry: list[TopicPartition] = []
            for node_id, group in grouped.items():
                if node_id < 0:
                    for topic_partition in group:
                        error = self.client.metadata.topic_error(topic_partition.topic)
                        if error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
                                error is ErrorCode.NONE
                                and topic_partition.partition >= (self.client.metadata.partition_count(
                                    topic_partition.topic) or 0)):
                            results[topic_partition] = missing(error_for(
                                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=str(topic_partition)))
                        else:
                            retry.append(topic_partition)
                    continue
                answered = await send(node_id, group)
                for topic_partition, result in answered.items():
                    error = getattr(result, "error", None)
                    if isinstance(error, KafkaError) and (is_stale_metadata_error(error.error_code)
                                                          and error.error_code
                                                          is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        retry.append(topic_partition)
                    else:
                        results[topic_partition] = result
            if retry:
                pending = retry
                raise _Retry(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return results

        try:
            return await self._with_retries(attempt, what)
        except KafkaTimeoutError as exc:
            for topic_partition in pending:
                results.setdefault(topic_partition, missing(exc))
            return results

    async def list_offsets(self, specs: Mapping[TopicPartition, int], *,
                           isolation_level: int = 0) -> dict[TopicPartition, ListOffsetsResult]:
        """Offsets by timestamp, or :class:`OffsetSpec` LATEST / EARLIEST / MAX_TIMESTAMP."""
        async def send(node_id: int, group: list[TopicPartition]) -> dict[TopicPartition, ListOffsetsResult]:
            request = m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
                list_offsets.ListOffsetsTopic(name, [list_offsets.ListOffsetsPartition(
                    partition_index=index, timestamp=int(specs[TopicPartition(name, index)])) for index in indexes])
                for name, indexes in _by_topic(group).items()])
            response: m.ListOffsetsResponse = await self.client.send(node_id, request, min_version=1)
            return {TopicPartition(topic.name, partition.partition_index): ListOffsetsResult(
                _error(partition.error_code, None, f"{topic.name}-{partition.partition_index}"),
                partition.offset, partition.timestamp, partition.leader_epoch)
                for topic in response.topics for partition in topic.partitions}

        return await self._per_leader(specs, send, lambda error: ListOffsetsResult(error), "ListOffsets")

    async def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, DeleteRecordsResult]:
        """Move partitions' log start offset to ``offset`` (-1: the high watermark)."""
        async def send(node_id: int, group: list[TopicPartition]) -> dict[TopicPartition, DeleteRecordsResult]:
            request = m.DeleteRecordsRequest(timeout_ms=self.config.request_timeout_ms, topics=[
                delete_records.DeleteRecordsTopic(name, [delete_records.DeleteRecordsPartition(
                    index, offsets[TopicPartition(name, index)]) for index in indexes])
                for name, indexes in _by_topic(group).items()])
            response: m.DeleteRecordsResponse = await self.client.send(node_id, request)
            return {TopicPartition(topic.name, partition.partition_index): DeleteRecordsResult(
                _error(partition.error_code, None, f"{topic.name}-{partition.partition_index}"),
                partition.low_watermark) for topic in response.topics for partition in topic.partitions}

        return await self._per_leader(offsets, send, lambda error: DeleteRecordsResult(error), "DeleteRecords")

    async def describe_producers(self, partitions: Sequence[TopicPartition]
                                 ) -> dict[TopicPartition, PartitionProducers]:
        async def send(node_id: int, group: list[TopicPartition]) -> dict[TopicPartition, PartitionProducers]:
            request = m.DescribeProducersRequest(topics=[TopicRequest(name, indexes)
                                                         for name, indexes in _by_topic(group).items()])
            response: m.DescribeProducersResponse = await self.client.send(node_id, request)
            return {TopicPartition(topic.name, partition.partition_index): PartitionProducers(
                _error(partition.error_code, partition.error_message, f"{topic.name}-{partition.partition_index}"),
                tuple(ProducerStateInfo(state.producer_id, state.producer_epoch, state.last_sequence,
                                        state.last_timestamp, state.coordinator_epoch, state.current_txn_start_offset)
                      for state in partition.active_producers))
                for topic in response.topics for partition in topic.partitions}

        return await self._per_leader(partitions, send, lambda error: PartitionProducers(error), "DescribeProducers")

    # --- transactions --------------------------------------------------------------------------------

    async def describe_transactions(self, transactional_ids: Sequence[str]) -> dict[str, TransactionDescription]:
        results = {}
        for transactional_id in transactional_ids:
            async def attempt(transactional_id: str = transactional_id) -> m.DescribeTransactionsResponse:
                node_id = await self.client.coordinator(COORDINATOR_TRANSACTION, transactional_id)
                response: m.DescribeTransactionsResponse = await self.client.send(
                    node_id, m.DescribeTransactionsRequest(transactional_ids=[transactional_id]))
                code = ErrorCode.from_code(response.transaction_states[0].error_code)
                if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    self.client.forget_coordinator(COORDINATOR_TRANSACTION, transactional_id)
                if code in _RETRY:
                    raise _Retry(code)
                return response

            state = (await self._with_retries(attempt, "DescribeTransactions")).transaction_states[0]
            results[transactional_id] = TransactionDescription(
                transactional_id, _error(state.error_code, None, f"transactional id {transactional_id!r}"),
                state.transaction_state, state.producer_id, state.producer_epoch, state.transaction_timeout_ms,
                state.transaction_start_time_ms,
                tuple(TopicPartition(topic.topic, index) for topic in state.topics for index in topic.partitions))
        return results

    async def list_transactions(self, *, states: Sequence[str] | None = None,
                                producer_ids: Sequence[int] | None = None) -> list[TransactionListing]:
        await self.start()
        await self.client.refresh_metadata()
        listings: dict[str, TransactionListing] = {}
        for node_id in list(self.client.metadata.brokers):
            async def attempt(node_id: int = node_id) -> m.ListTransactionsResponse:
                response: m.ListTransactionsResponse = await self.client.send(node_id, m.ListTransactionsRequest(
                    state_filters=list(states or ()), producer_id_filters=list(producer_ids or ())))
                if response.error_code in _RETRY:
                    raise _Retry(ErrorCode.from_code(response.error_code))
                if response.error_code != ErrorCode.NONE:
                    raise error_for(response.error_code, context=f"ListTransactions at broker {node_id}")
                return response

            for state in (await self._with_retries(attempt, "ListTransactions")).transaction_states:
                listings[state.transactional_id] = TransactionListing(state.transactional_id, state.producer_id,
                                                                      state.transaction_state)
        return sorted(listings.values(), key=lambda listing: listing.transactional_id)


    # SCRAM credentials -------------------------------------------------------------------------
    async def describe_user_scram_credentials(self, users: Sequence[str] | None = None
                                              ) -> dict[str, tuple[KafkaError | None, dict[str, int]]]:
        """Each user's error (None) and SCRAM mechanisms with their iteration counts; every user when None."""
        request = m.DescribeUserScramCredentialsRequest(
            users=None if users is None else [DescribeScramUser(name=user) for user in users])
        response: m.DescribeUserScramCredentialsResponse = await self._with_retries(
            lambda: self.client.send_any(request), "DescribeUserScramCredentials")
        top = _error(response.error_code, response.error_message, "DescribeUserScramCredentials")
        if top is not None:
            raise top
        return {result.user: (_error(result.error_code, result.error_message, f"user {result.user!r}"),
                              {_SCRAM_NAMES.get(info.mechanism, str(info.mechanism)): info.iterations
                               for info in result.credential_infos})
                for result in response.results}

    async def alter_user_scram_credentials(self, upsertions: Sequence[tuple[str, str, str, int]] = (),
                                           deletions: Sequence[tuple[str, str]] = ()) -> dict[str, ResourceResult]:
        """Set ``(user, mechanism, password, iterations)`` credentials (salted here; the password never
        leaves the client) and delete ``(user, mechanism)`` ones. Mechanisms: SCRAM-SHA-256, SCRAM-SHA-512."""
        import hashlib
        import os

        numbers = {name: number for number, name in _SCRAM_NAMES.items()}
        request = m.AlterUserScramCredentialsRequest(
            deletions=[ScramDeletion(name=user, mechanism=numbers.get(mechanism.upper(), 0))
                       for user, mechanism in deletions],
            upsertions=[])
        for user, mechanism, password, iterations in upsertions:
            salt = os.urandom(32)
            hash_name = "sha512" if mechanism.upper() == "SCRAM-SHA-512" else "sha256"
            request.upsertions.append(ScramUpsertion(
                name=user, mechanism=numbers.get(mechanism.upper(), 0), iterations=iterations, salt=salt,
                salted_password=hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)))
        response: m.AlterUserScramCredentialsResponse = await self._with_retries(
            lambda: self.client.send_any(request), "AlterUserScramCredentials")
        return {result.user: ResourceResult(result.user, _error(result.error_code, result.error_message,
                                                                f"user {result.user!r}"))
                for result in response.results}


def _assignment(data: bytes) -> tuple[TopicPartition, ...]:
    if not data:
        return ()
    version = min(int.from_bytes(data[:2], "big", signed=True), m.ConsumerProtocolAssignment.VALID_VERSIONS[1])
    try:
        assignment = m.ConsumerProtocolAssignment.decode(data[2:], version)
    except (ProtocolError, ValueError):
        return ()
    return tuple(TopicPartition(topic.topic, index) for topic in assignment.assigned_partitions
                 for index in topic.partitions)
