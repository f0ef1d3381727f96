"""The client's exceptions.

Kafka-level failures are :class:`~kafkalite.protocol.errors.KafkaError` (it carries the
``ErrorCode``, and ``retriable`` says whether the same request may succeed later). The subclasses
here sort them the way the Java client's exception classes do, so that code can tell at a glance
what to do next:

* :class:`KafkaTimeoutError` -- something did not happen in time (a request, buffer space, metadata,
  a delivery); retriable.
* :class:`KafkaConnectionError` -- the connection to a broker failed or was closed mid-request.
* :class:`UnsupportedVersionError` -- the broker lacks an API (or every version of it) the client needs.
* :class:`ProducerFencedError` -- another producer with the same ``transactional.id`` took over;
  fatal: close the producer.
* :class:`TransactionAbortableError` -- the current transaction cannot commit; call
  ``abort_transaction()`` and go on.
* :class:`TransactionStateError` -- a transactional call made in the wrong state.
* :class:`RecordTooLargeError` -- a record larger than ``max.request.size`` or ``buffer.memory``.
* :class:`CommitFailedError` -- a consumer's commit was refused because its group moved on (the
  partitions may belong to another member now); poll again to rejoin.
* :class:`OffsetOutOfRangeError` -- a fetch position outside the log with ``auto.offset.reset=none``;
  :class:`NoOffsetForPartitionError` -- no committed offset and ``auto.offset.reset=none``.
* :class:`FencedInstanceIdError` -- another consumer took over this ``group.instance.id``; fatal.

Misuse that is no Kafka error keeps Python's own types: ``TypeError`` for a value of the wrong
type given to ``send()``, :class:`~kafkalite.client.config.ConfigError` (a ``ValueError``) for a
bad config, :class:`ClientClosedError` for a call on a closed client.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ClientClosedError",
    "CommitFailedError",
    "FencedInstanceIdError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "ProducerFencedError",
    "RecordTooLargeError",
    "TransactionAbortableError",
    "TransactionStateError",
    "UnsupportedVersionError",
    "error_for",
]


class KafkaTimeoutError(KafkaError):
    """An operation did not complete before its deadline."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class KafkaConnectionError(KafkaError):
    """A broker connection failed, or closed before a response arrived."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class UnsupportedVersionError(KafkaError):
    """The broker does not serve an API, or no version of it that this client knows."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class ProducerFencedError(KafkaError):
    """A newer producer instance with the same transactional id (or epoch) fenced this one. Fatal."""


class TransactionAbortableError(KafkaError):
    """The ongoing transaction failed; abort it, then the producer can begin a new one."""


class TransactionStateError(KafkaError):
    """A transactional call made in a state that does not allow it."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_TXN_STATE, message)


class RecordTooLargeError(KafkaError):
    """A record that can never be sent with this configuration."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)


class CommitFailedError(KafkaError):
    """An offset commit the group refused because it rebalanced (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
    REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH...): the partitions may belong to another member now.
    The consumer rejoins on its next poll; records since the last commit may be read again."""


class OffsetOutOfRangeError(KafkaError):
    """Fetch positions outside their partitions' logs, with ``auto.offset.reset=none``."""

    def __init__(self, message: str, offsets: dict[object, int]) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)
        self.offsets = offsets


class NoOffsetForPartitionError(KafkaError):
    """Partitions without a committed offset, with ``auto.offset.reset=none``."""

    def __init__(self, message: str, partitions: list[object]) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)
        self.partitions = partitions


class FencedInstanceIdError(KafkaError):
    """Another consumer with the same ``group.instance.id`` joined the group; this one must stop. Fatal."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.FENCED_INSTANCE_ID, message)


class ClientClosedError(RuntimeError):
    """The client was closed; no more calls."""


_FENCED = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


def error_for(code: int, message: str | None = None, context: str = "") -> KafkaError:
    """The exception for a response's error code, with ``context`` (a topic-partition, a group) named."""
    error_code = ErrorCode.from_code(code)
    text = message or error_code.message
    if context:
        text = f"{context}: {error_code.name}: {text}"
    else:
        text = f"{error_code.name}: {text}"
    if error_code is ErrorCode.UNSUPPORTED_VERSION:
        return UnsupportedVersionError(text)
    if error_code in _FENCED:
        return ProducerFencedError(error_code, text)
    if error_code is ErrorCode.FENCED_INSTANCE_ID:
        return FencedInstanceIdError(text)
    if error_code is ErrorCode.TRANSACTION_ABORTABLE:
        return TransactionAbortableError(error_code, text)
    return KafkaError(error_code, text)
