"""DescribeLogDirs (API key 35), v0-4: the log directory and the size of every partition in it.

There is one log directory: the data directory's absolute path, or ``memory`` when storage is in
memory. Topics null lists every partition; otherwise the partitions asked for that exist (unknown
ones are left out, as Kafka does, and topics with no partition left are omitted). Each partition
reports its size in bytes, an offset lag of 0 (the high watermark is the log end offset on a
single replica) and ``is_future_key`` false (there is no AlterReplicaLogDirs). v4 adds the volume's
total and usable bytes (-1 in memory); a directory that cannot be read is KAFKA_STORAGE_ERROR.
v0 (removed in Kafka 4) is served: it is v1 without the throttling change.
"""

from __future__ import annotations

import os
import shutil

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafkalite.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

__all__ = ["handle_describe_log_dirs"]

MEMORY_LOG_DIR = "memory"


@handles(api_key=35, min_version=0, max_version=4)
def handle_describe_log_dirs(context: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    cluster = context.cluster
    data_dir = cluster.data_dir
    result = DescribeLogDirsResult(error_code=ErrorCode.NONE,
                                   log_dir=MEMORY_LOG_DIR if data_dir is None else os.path.abspath(data_dir))
    if data_dir is not None:
        try:
            usage = shutil.disk_usage(data_dir)
        except OSError:
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=[result])
        result.total_bytes, result.usable_bytes = usage.total, usage.free

    if request.topics is None:
        wanted = {topic.name: [partition.index for partition in topic.partitions] for topic in cluster.topics}
    else:
        wanted = {}
        for entry in request.topics:
            wanted.setdefault(entry.topic, []).extend(entry.partitions)
    for name, indexes in wanted.items():
        partitions = []
        for index in dict.fromkeys(indexes):
            partition = cluster.topics.partition(name, index)
            if partition is not None:
                partitions.append(DescribeLogDirsPartition(partition_index=index,
                                                           partition_size=partition.log.size_bytes(),
                                                           offset_lag=0, is_future_key=False))
        if partitions:
            result.topics.append(DescribeLogDirsTopic(name=name, partitions=partitions))
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=[result])
