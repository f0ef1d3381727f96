"""ListTransactions (API key 66), v0-1: the transactional ids this coordinator knows (KIP-664).

Filters, all optional and combined: states (Kafka's names; unknown names are echoed in
``unknown_state_filters`` and match nothing), producer ids, and (v1) a minimum duration: only
transactions running for longer than it (now minus the start time).
"""

from __future__ import annotations

from kafkalite.broker.core.txn.state import TransactionState
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from kafkalite.protocol.messages.list_transactions_response import TransactionState as ListedState

__all__ = ["handle_list_transactions"]


@handles(api_key=66, min_version=0, max_version=1)
def handle_list_transactions(context: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    transactions = context.cluster.transactions
    response = ListTransactionsResponse()
    states = set()
    for name in request.state_filters:
        state = TransactionState.from_kafka_name(name)
        if state is None:
            response.unknown_state_filters.append(name)
        else:
            states.add(state)
    producer_ids = set(request.producer_id_filters)
    duration = request.duration_filter if context.api_version >= 1 else -1
    now = transactions.clock()
    for metadata in transactions.transactions():
        if metadata.state == TransactionState.DEAD:
            continue
        if request.state_filters and metadata.state not in states:
            continue
        if producer_ids and metadata.producer_id not in producer_ids:
            continue
        if duration >= 0 and now - metadata.start_ms <= duration:
            continue
        response.transaction_states.append(ListedState(transactional_id=metadata.transactional_id,
                                                       producer_id=metadata.producer_id,
                                                       transaction_state=metadata.state.kafka_name))
    return response
