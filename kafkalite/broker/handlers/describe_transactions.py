"""DescribeTransactions (API key 65), v0: the state of transactional ids (KIP-664).

For each id: its state in Kafka's names (Empty, Ongoing, PrepareCommit, PrepareAbort,
CompleteCommit, CompleteAbort), producer id and epoch, timeout, the start time of the current
transaction (-1 when none) and its partitions (while it is prepared, those whose marker is not yet
written). An unknown id is TRANSACTIONAL_ID_NOT_FOUND, an empty one INVALID_REQUEST.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from kafkalite.protocol.messages.describe_transactions_response import TopicData, TransactionState

__all__ = ["handle_describe_transactions"]


@handles(api_key=65, min_version=0, max_version=0)
def handle_describe_transactions(context: RequestContext,
                                 request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    transactions = context.cluster.transactions
    response = DescribeTransactionsResponse()
    for transactional_id in request.transactional_ids:
        state = TransactionState(transactional_id=transactional_id, transaction_state="", producer_id=-1,
                                 producer_epoch=-1, transaction_timeout_ms=-1, transaction_start_time_ms=-1)
        response.transaction_states.append(state)
        metadata = transactions.get(transactional_id) if transactional_id else None
        if not transactional_id:
            state.error_code = ErrorCode.INVALID_REQUEST
            continue
        if metadata is None:
            state.error_code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            continue
        state.transaction_state = metadata.state.kafka_name
        state.producer_id = metadata.producer_id
        state.producer_epoch = metadata.producer_epoch
        state.transaction_timeout_ms = metadata.timeout_ms
        state.transaction_start_time_ms = metadata.start_ms
        by_topic: dict[str, TopicData] = {}
        for topic, index in sorted(metadata.partitions):
            data = by_topic.get(topic)
            if data is None:
                data = by_topic[topic] = TopicData(topic=topic)
                state.topics.append(data)
            data.partitions.append(index)
    return response
