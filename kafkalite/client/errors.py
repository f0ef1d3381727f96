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

Misuse that is no Kafka error keeps Python's own types: ``TypeError`` for a value of the wrong
type given to ``send()``, :class:`~kafkalite.client.config.ConfigError` (a ``ValueError``) for a
bad config, :class:`ClientClosedError` for a call on a closed client.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ClientClosedError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
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
    if error_code is ErrorCode.TRANSACTION_ABORTABLE:
        return TransactionAbortableError(error_code, text)
    return KafkaError(error_code, text)
