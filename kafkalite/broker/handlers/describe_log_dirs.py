"""DescribeLogDirs (API key 35), v0-4: each log directory and the size of every partition in it.

The log directories are ``log.dirs`` (else ``log.dir``), by absolute path, in their configured
order; with storage in memory there is one, named ``memory``. Topics null lists every partition;
otherwise the partitions asked for that exist (unknown ones are left out, as Kafka does, and a
directory's topics with no partition left are omitted). Each partition reports its size in bytes,
an offset lag of 0 (the high watermark is the log end offset on a single replica) and
``is_future_key`` false (a move between directories completes within the AlterReplicaLogDirs that
asked for it, so there is never a future replica to report). v4 adds the volume's total and usable
bytes (-1 in memory); a directory that cannot be read is KAFKA_STORAGE_ERROR. v0 (removed in
Kafka 4) is served: it is v1 without the throttling change.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafkalite.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

__all__ = ["MEMORY_LOG_DIR", "handle_describe_log_dirs", "log_dir_name"]

MEMORY_LOG_DIR = "memory"


def log_dir_name(log_dir: Path) -> str:
    """A log directory as Kafka names it: its absolute path."""
    return os.path.abspath(log_dir)


@handles(api_key=35, min_version=0, max_version=4)
def handle_describe_log_dirs(context: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    cluster = context.cluster
    if request.topics is None:
        wanted = {topic.name: [partition.index for partition in topic.partitions] for topic in cluster.topics}
    else:
        wanted = {}
        for entry in request.topics:
            wanted.setdefault(entry.topic, []).extend(entry.partitions)
    log_dirs: list[Path | None] = list(cluster.log_dirs) or [None]
    results = []
    for log_dir in log_dirs:
        result = DescribeLogDirsResult(error_code=ErrorCode.NONE,
                                       log_dir=MEMORY_LOG_DIR if log_dir is None else log_dir_name(log_dir))
        results.append(result)
        if log_dir is not None:
            try:
                usage = shutil.disk_usage(log_dir)
            except OSError:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            result.total_bytes, result.usable_bytes = usage.total, usage.free
        for name, indexes in wanted.items():
            partitions = []
            for index in dict.fromkeys(indexes):
                partition = cluster.topics.partition(name, index)
                if partition is None or cluster.log_manager.log_dir_of(name, index) != log_dir:
                    continue
                partitions.append(DescribeLogDirsPartition(partition_index=index,
                                                           partition_size=partition.log.size_bytes(),
                                                           offset_lag=0, is_future_key=False))
            if partitions:
                result.topics.append(DescribeLogDirsTopic(name=name, partitions=partitions))
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=results)
