"""InitProducerId (API key 22), v0-5: a producer id and epoch for an idempotent or transactional producer.

Without a transactional id the producer gets a fresh producer id at epoch 0 (also when it asks to
bump the epoch of its old id, as Kafka answers an idempotent producer). With one, the transaction
coordinator (``kafkalite.broker.core.txn``) keeps the id's producer id and bumps its epoch,
fencing older instances; an open transaction is first aborted and the caller gets
CONCURRENT_TRANSACTIONS to retry. v3+ may carry the current producer id and epoch (KIP-360): a
matching (or just-bumped) epoch is bumped, anything else is PRODUCER_FENCED. The timeout must be
in (0, ``transaction.max.timeout.ms``] (INVALID_TRANSACTION_TIMEOUT). A producer id without an
epoch, or the reverse, is INVALID_REQUEST. Before v4, PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH, as Kafka does for clients that do not know it.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import InitProducerIdRequest, InitProducerIdResponse

__all__ = ["handle_init_producer_id"]


@handles(api_key=22, min_version=0, max_version=5)
def handle_init_producer_id(context: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    producer_id, producer_epoch = request.producer_id, request.producer_epoch
    if (producer_id < 0) != (producer_epoch < 0):
        return InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
    result = context.cluster.transactions.init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                                           producer_id, producer_epoch)
    error = result.error
    if error == ErrorCode.PRODUCER_FENCED and context.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(error_code=error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)
