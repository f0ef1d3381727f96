"""AlterReplicaLogDirs (API key 34), v1-2: move partitions between the configured log directories.

Each partition named under a directory is moved there, as Kafka's broker answers per partition:
a directory that is not one of ``log.dirs`` (by absolute path, as DescribeLogDirs names them) is
LOG_DIR_NOT_FOUND; a partition this broker does not host REPLICA_NOT_AVAILABLE; a partition
already in that directory NONE, with nothing to do; any other NONE once the move is done. Kafka
copies the replica in the background through a "future" replica and swaps it in when it caught
up; kafkalite closes the log, copies its files (segments, indexes, producer state snapshots) into
the target directory and fsyncs them, swaps the directories and reopens the log there, all before
answering, so appends and reads wait for the move and DescribeLogDirs never shows a future replica.
A move interrupted by a crash is completed or rolled back at the next start. With storage in
memory the one log directory is ``memory``. v0 (removed in Kafka 4) is not served.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kafkalite.broker.handlers.describe_log_dirs import MEMORY_LOG_DIR, log_dir_name
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from kafkalite.protocol.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirTopicResult,
)

__all__ = ["handle_alter_replica_log_dirs"]

log = logging.getLogger("kafkalite.handlers")


@handles(api_key=34, min_version=1, max_version=2)
def handle_alter_replica_log_dirs(context: RequestContext, request: AlterReplicaLogDirsRequest
                                  ) -> AlterReplicaLogDirsResponse:
    cluster = context.cluster
    by_name: dict[str, Path | None] = ({log_dir_name(log_dir): log_dir for log_dir in cluster.log_dirs}
                                       if cluster.log_dirs else {MEMORY_LOG_DIR: None})
    targets: dict[tuple[str, int], str] = {}  # the last directory named for a partition wins, as in Kafka
    for requested_dir in request.dirs:
        for topic in requested_dir.topics:
            for index in topic.partitions:
                targets[(topic.name, index)] = requested_dir.path
    results: dict[str, AlterReplicaLogDirTopicResult] = {}
    for (name, index), path in targets.items():
        result = results.setdefault(name, AlterReplicaLogDirTopicResult(topic_name=name, partitions=[]))
        result.partitions.append(AlterReplicaLogDirPartitionResult(
            partition_index=index, error_code=_move(context, name, index, path, by_name)))
    return AlterReplicaLogDirsResponse(results=list(results.values()))


def _move(context: RequestContext, name: str, index: int, path: str, by_name: dict[str, Path | None]) -> ErrorCode:
    cluster = context.cluster
    if path not in by_name:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if cluster.topics.partition(name, index) is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    target = by_name[path]
    if target is None or cluster.log_manager.log_dir_of(name, index) == target:
        return ErrorCode.NONE
    try:
        cluster.topics.move_partition(name, index, target)
    except OSError as exc:
        log.error("moving %s-%d to %s failed: %s", name, index, path, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE
