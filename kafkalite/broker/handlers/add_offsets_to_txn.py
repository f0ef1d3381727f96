"""AddOffsetsToTxn (API key 25), v0-4: add a group's offsets partition to a producer's transaction.

As in Kafka, the group's ``__consumer_offsets`` partition joins the transaction like any other
partition (see AddPartitionsToTxn for the errors); TxnOffsetCommit may then stage offsets for the
group, and the end of the transaction commits or drops them. PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH before v2.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

__all__ = ["handle_add_offsets_to_txn"]


@handles(api_key=25, min_version=0, max_version=4)
def handle_add_offsets_to_txn(context: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    transactions = context.cluster.transactions
    if not request.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    error = transactions.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                                        [transactions.offsets_partition(request.group_id)])
    if error == ErrorCode.PRODUCER_FENCED and context.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(error_code=error)
