"""EndTxn (API key 26), v0-4: commit or abort a producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort to ``__transaction_state``, then a COMMIT/ABORT
marker to every partition of the transaction, then CompleteCommit/CompleteAbort; the answer comes
once the markers are written (Kafka answers after PrepareCommit), so what was committed is readable
by read_committed consumers when the producer hears of it. Repeating an EndTxn that completed is
answered with success; the opposite outcome, or ending an Empty transaction, is INVALID_TXN_STATE;
a request while markers are being written is CONCURRENT_TRANSACTIONS. PRODUCER_FENCED is answered
as INVALID_PRODUCER_EPOCH before v2. Not implemented: v5 (transactions V2, KIP-890 part 2, which
this broker does not advertise through a ``transaction.version`` feature).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import EndTxnRequest, EndTxnResponse

__all__ = ["handle_end_txn"]


@handles(api_key=26, min_version=0, max_version=4)
def handle_end_txn(context: RequestContext, request: EndTxnRequest) -> EndTxnResponse | Awaitable[EndTxnResponse]:
    version = context.api_version
    future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

    def done(error: ErrorCode) -> None:
        if not future.done():
            future.set_result(error)

    error = context.cluster.transactions.end_transaction(request.transactional_id, request.producer_id,
                                                        request.producer_epoch, request.committed, done)
    if error is not None:
        return _response(error, version)
    if future.done():
        return _response(future.result(), version)
    return _wait(future, version)


async def _wait(future: asyncio.Future[ErrorCode], version: int) -> EndTxnResponse:
    return _response(await future, version)


def _response(error: ErrorCode, version: int) -> EndTxnResponse:
    if error == ErrorCode.PRODUCER_FENCED and version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(error_code=error)
