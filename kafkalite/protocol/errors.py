"""Kafka protocol error codes: one ``IntEnum`` carrying each code's retriability and meaning.

Every ``error_code`` field in a Kafka response holds one of these numbers. The table mirrors the
``Errors`` enum of the Apache Kafka Java client (``org.apache.kafka.common.protocol.Errors``) as of
Kafka 4.x: the member names are Kafka's constant names and the numbers are the wire codes, which are
contiguous from -1 (``UNKNOWN_SERVER_ERROR``) to 133 (``SHARE_SESSION_LIMIT_REACHED``).

``retriable`` is ``True`` exactly when the Java exception class Kafka maps the code to extends
``org.apache.kafka.common.errors.RetriableException`` (directly or through ``InvalidMetadataException``
/ ``RefreshRetriableException``). It answers "may the *same* request succeed if sent again, perhaps
after a metadata refresh or a back-off?"; it does not say how a client should recover from the
others (rejoining a group, aborting a transaction, ...).

``message`` is a one-line description written for this project; it paraphrases Kafka's meaning and is
what a broker may put in an ``error_message`` field when it has nothing more specific to say.

Unknown codes: a peer newer than this table can send a code we do not list. ``ErrorCode(n)`` stays
strict and raises ``ValueError`` (useful in tests and in the broker, which must only emit known codes),
while :meth:`ErrorCode.from_code` and :func:`is_retriable` tolerate it the way the Java client does:
the code is treated as ``UNKNOWN_SERVER_ERROR``, which is not retriable. Callers that need to report
the raw number should keep the ``int`` they decoded alongside the member.

:class:`KafkaError` is the one exception that carries a code: code that decides a request's outcome
raises it, and the code that builds the response turns it into the ``error_code`` (and, where the
response has one, the ``error_message``) of the resource it concerns.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode", "KafkaError", "is_retriable"]


class ErrorCode(IntEnum):
    """A Kafka protocol error code.

    Members compare and encode as plain ``int`` (the wire type is INT16) and carry two attributes:

    * ``retriable`` -- whether Kafka's Java client classifies the error as retriable;
    * ``message`` -- a short human-readable description.

    Each member is declared as ``NAME = code``; its two attributes are read from ``_DETAILS``, the
    table below the class, which gives every member its ``(retriable, message)``.
    """

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        """Whether Kafka's Java client classifies the error as retriable."""
        return _DETAILS[self][0]

    @property
    def message(self) -> str:
        """A short human-readable description."""
        return _DETAILS[self][1]

    @classmethod
    def from_code(cls, code: int) -> ErrorCode:
        """Return the member for a wire ``code``, tolerating codes this table does not know.

        Unknown codes (a newer peer, or garbage) map to :attr:`UNKNOWN_SERVER_ERROR`, exactly as
        ``Errors.forCode`` does in the Java client; the original number is not preserved, so keep the
        decoded ``int`` if you need to log it. Never raises.
        """
        return _BY_CODE.get(code, cls.UNKNOWN_SERVER_ERROR)


# Each member's (retriable, message), in the order of the class. Kept out of the class body: the enum
# machinery makes a member whose value is a plain int with less work than one made by a __new__ of
# our own from a tuple, and with 135 members that was about a tenth of what importing this module cost.
_DETAILS: dict[ErrorCode, tuple[bool, str]] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: (False, "The server hit an unexpected failure while handling the request."),
    ErrorCode.NONE: (False, "No error: the operation succeeded."),
    ErrorCode.OFFSET_OUT_OF_RANGE: (False, "The requested offset lies outside the offsets the server currently keeps "
                                           "for the partition."),
    ErrorCode.CORRUPT_MESSAGE: (True, "A record failed its CRC check, has an invalid size, has a null key on a "
                                      "compacted topic, or is otherwise damaged."),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: (True, "This broker does not host the requested topic or partition."),
    ErrorCode.INVALID_FETCH_SIZE: (False, "The fetch size in the request is not valid."),
    ErrorCode.LEADER_NOT_AVAILABLE: (True, "The partition currently has no leader, typically because a leader "
                                           "election is under way."),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (True, "This broker is not the partition leader (for leader-only requests) or "
                                             "not a replica of the partition at all."),
    ErrorCode.REQUEST_TIMED_OUT: (True, "The request did not complete within its timeout."),
    ErrorCode.BROKER_NOT_AVAILABLE: (False, "The broker in question is currently unavailable."),
    ErrorCode.REPLICA_NOT_AVAILABLE: (True, "A replica of the requested partition is not available."),
    ErrorCode.MESSAGE_TOO_LARGE: (False, "A record or batch exceeds the largest size the broker accepts."),
    ErrorCode.STALE_CONTROLLER_EPOCH: (False, "The request carried an old controller epoch; the controller has moved "
                                              "to another broker."),
    ErrorCode.OFFSET_METADATA_TOO_LARGE: (False, "The metadata string attached to a committed offset is too long."),
    ErrorCode.NETWORK_EXCEPTION: (True, "The connection was closed before a response arrived."),
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: (True, "The coordinator is still loading its state and cannot serve the "
                                                   "request yet."),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: (True, "No coordinator is currently available for this group or "
                                                "transactional id."),
    ErrorCode.NOT_COORDINATOR: (True, "This broker is not the coordinator for the given group or transactional id."),
    ErrorCode.INVALID_TOPIC_EXCEPTION: (False, "The request referred to a topic whose name is invalid or that may "
                                               "not be used this way."),
    ErrorCode.RECORD_LIST_TOO_LARGE: (False, "A record batch is larger than the configured log segment size."),
    ErrorCode.NOT_ENOUGH_REPLICAS: (True, "Records were refused because fewer in-sync replicas exist than "
                                          "min.insync.replicas requires."),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: (True, "Records were appended to the log but reached fewer in-sync "
                                                       "replicas than required."),
    ErrorCode.INVALID_REQUIRED_ACKS: (False, "The produce request asked for an unsupported acks value."),
    ErrorCode.ILLEGAL_GENERATION: (False, "The group generation id in the request is not the current one."),
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: (False, "The member's protocol type or protocols do not match the group, "
                                                   "or the first member sent none."),
    ErrorCode.INVALID_GROUP_ID: (False, "The group id is not valid (for example empty)."),
    ErrorCode.UNKNOWN_MEMBER_ID: (False, "The coordinator does not know this member id."),
    ErrorCode.INVALID_SESSION_TIMEOUT: (False, "The session timeout is outside the broker's "
                                               "group.min/max.session.timeout.ms range."),
    ErrorCode.REBALANCE_IN_PROGRESS: (False, "The group is rebalancing; the member has to rejoin."),
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: (False, "The offset commit is too large to be stored."),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: (False, "The principal is not authorized to access the topic."),
    ErrorCode.GROUP_AUTHORIZATION_FAILED: (False, "The principal is not authorized to access the group."),
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: (False, "The principal is not authorized to perform the cluster-level "
                                                    "operation."),
    ErrorCode.INVALID_TIMESTAMP: (False, "A record timestamp is outside the range the broker accepts."),
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: (False, "The SASL mechanism the client asked for is not enabled on this "
                                                  "broker."),
    ErrorCode.ILLEGAL_SASL_STATE: (False, "The request is not allowed at this point of the SASL exchange."),
    ErrorCode.UNSUPPORTED_VERSION: (False, "The broker does not support this version of the API."),
    ErrorCode.TOPIC_ALREADY_EXISTS: (False, "Creation failed: a topic of that name exists already."),
    ErrorCode.INVALID_PARTITIONS: (False, "The requested partition count is not valid (for example below 1)."),
    ErrorCode.INVALID_REPLICATION_FACTOR: (False, "The replication factor must be at least 1 and at most the number "
                                                  "of live brokers."),
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: (False, "The explicit replica assignment is not valid."),
    ErrorCode.INVALID_CONFIG: (False, "A configuration value in the request is not valid."),
    ErrorCode.NOT_CONTROLLER: (True, "This broker is not the active controller."),
    ErrorCode.INVALID_REQUEST: (False, "The request is malformed or not understood; the client library or broker "
                                       "version is probably at fault."),
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: (False, "The request needs a newer message format than the one the "
                                                      "topic uses."),
    ErrorCode.POLICY_VIOLATION: (False, "The request breaks a policy configured on the broker."),
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: (False, "The broker received a producer sequence number out of order."),
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: (False, "The broker received a producer sequence number it has already seen."),
    ErrorCode.INVALID_PRODUCER_EPOCH: (False, "The producer used an epoch older than the current one."),
    ErrorCode.INVALID_TXN_STATE: (False, "The transactional operation is not allowed in the transaction's current "
                                         "state."),
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: (False, "The producer id is not the one currently assigned to this "
                                                   "transactional id."),
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: (False, "The transaction timeout exceeds the broker's "
                                                   "transaction.max.timeout.ms."),
    ErrorCode.CONCURRENT_TRANSACTIONS: (True, "Another operation on the same transaction is still in progress."),
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: (False, "The transaction coordinator sending transaction markers is no "
                                                      "longer the current one for the producer."),
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (False, "The principal is not authorized to use the "
                                                             "transactional id."),
    ErrorCode.SECURITY_DISABLED: (False, "Security features are not enabled on the broker."),
    ErrorCode.OPERATION_NOT_ATTEMPTED: (False, "The broker skipped this item because another part of the batched "
                                               "request failed."),
    ErrorCode.KAFKA_STORAGE_ERROR: (True, "The broker hit a disk error while accessing the log."),
    ErrorCode.LOG_DIR_NOT_FOUND: (False, "The requested log directory is not configured on the broker."),
    ErrorCode.SASL_AUTHENTICATION_FAILED: (False, "Authentication over SASL did not succeed (bad credentials or a "
                                                  "failed exchange)."),
    ErrorCode.UNKNOWN_PRODUCER_ID: (False, "The broker has no state for this producer id, for example because its "
                                           "records were all removed by retention."),
    ErrorCode.REASSIGNMENT_IN_PROGRESS: (False, "The operation conflicts with a partition reassignment that is "
                                                "currently running."),
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: (False, "The delegation token feature is turned off on this cluster."),
    ErrorCode.DELEGATION_TOKEN_NOT_FOUND: (False, "The delegation token does not exist on the server."),
    ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH: (False, "The principal is not the owner or a renewer of the "
                                                       "delegation token."),
    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: (False, "Delegation token requests are refused on plaintext, "
                                                            "one-way SSL or token-authenticated connections."),
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: (False, "The principal is not authorized for the delegation "
                                                             "token operation."),
    ErrorCode.DELEGATION_TOKEN_EXPIRED: (False, "The delegation token is past its expiry time."),
    ErrorCode.INVALID_PRINCIPAL_TYPE: (False, "The broker does not support the principal type given."),
    ErrorCode.NON_EMPTY_GROUP: (False, "The group still has members."),
    ErrorCode.GROUP_ID_NOT_FOUND: (False, "No group with this id exists."),
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND: (True, "The broker has no fetch session with this id."),
    ErrorCode.INVALID_FETCH_SESSION_EPOCH: (True, "The fetch session epoch does not match the broker's."),
    ErrorCode.LISTENER_NOT_FOUND: (True, "The partition leader has no listener matching the one the metadata request "
                                         "arrived on."),
    ErrorCode.TOPIC_DELETION_DISABLED: (False, "Deleting topics is disabled on this cluster."),
    ErrorCode.FENCED_LEADER_EPOCH: (True, "The request's leader epoch is behind the one this broker knows."),
    ErrorCode.UNKNOWN_LEADER_EPOCH: (True, "The request's leader epoch is ahead of the one this broker knows."),
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: (False, "The client cannot handle the compression type used by the "
                                                    "partition."),
    ErrorCode.STALE_BROKER_EPOCH: (False, "The broker epoch in the request is out of date."),
    ErrorCode.OFFSET_NOT_AVAILABLE: (True, "The new leader's high watermark has not caught up yet, so the offset "
                                           "cannot be served safely."),
    ErrorCode.MEMBER_ID_REQUIRED: (False, "The member must rejoin with the member id the coordinator just assigned "
                                          "to it."),
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: (True, "The preferred leader of the partition is not available."),
    ErrorCode.GROUP_MAX_SIZE_REACHED: (False, "The group already holds its maximum number of members."),
    ErrorCode.FENCED_INSTANCE_ID: (False, "Another member with the same group.instance.id but a different member id "
                                          "has taken over this static membership."),
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: (True, "No replica eligible to become leader is available."),
    ErrorCode.ELECTION_NOT_NEEDED: (True, "The partition already has the desired leader; no election was needed."),
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: (False, "There is no partition reassignment to act on."),
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: (False, "Offsets of a topic cannot be deleted while the group is actively "
                                                 "subscribed to it."),
    ErrorCode.INVALID_RECORD: (False, "The broker's validation rejected the record."),
    ErrorCode.UNSTABLE_OFFSET_COMMIT: (True, "Pending transactional offset commits must complete before offsets can "
                                             "be fetched."),
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: (True, "The request would exceed the throttling quota."),
    ErrorCode.PRODUCER_FENCED: (False, "A newer producer with the same transactional id has fenced this one."),
    ErrorCode.RESOURCE_NOT_FOUND: (False, "A resource named in the request does not exist."),
    ErrorCode.DUPLICATE_RESOURCE: (False, "The request named the same resource more than once."),
    ErrorCode.UNACCEPTABLE_CREDENTIAL: (False, "The requested credential does not meet the acceptance criteria."),
    ErrorCode.INCONSISTENT_VOTER_SET: (False, "The sender or the receiver of a voter-only request is not one of the "
                                              "expected voters."),
    ErrorCode.INVALID_UPDATE_VERSION: (False, "The update version in the request is not valid."),
    ErrorCode.FEATURE_UPDATE_FAILED: (False, "Finalized features could not be updated because of an unexpected "
                                             "server error."),
    ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE: (False, "A forwarded request's principal could not be deserialized; "
                                                         "the cluster's security setup is inconsistent."),
    ErrorCode.SNAPSHOT_NOT_FOUND: (False, "The requested snapshot does not exist."),
    ErrorCode.POSITION_OUT_OF_RANGE: (False, "The requested position is negative or beyond the end of the snapshot."),
    ErrorCode.UNKNOWN_TOPIC_ID: (True, "This broker does not host a topic with this topic id."),
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: (False, "Another broker has already registered with this broker id."),
    ErrorCode.BROKER_ID_NOT_REGISTERED: (False, "No broker is registered with this broker id."),
    ErrorCode.INCONSISTENT_TOPIC_ID: (True, "The topic id in the request differs from the topic id of the log."),
    ErrorCode.INCONSISTENT_CLUSTER_ID: (False, "The cluster id in the request differs from the server's."),
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: (False, "No transaction state exists for this transactional id."),
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR: (True, "The fetch session mixed or changed topic ids inconsistently."),
    ErrorCode.INELIGIBLE_REPLICA: (False, "The proposed ISR contains a replica that is not eligible."),
    ErrorCode.NEW_LEADER_ELECTED: (False, "The partition state was updated, but meanwhile a different leader was "
                                          "elected."),
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE: (False, "The requested offset is only available from tiered (remote) "
                                                      "storage."),
    ErrorCode.FENCED_MEMBER_EPOCH: (False, "The coordinator fenced the member epoch; the member must give up its "
                                           "partitions and rejoin."),
    ErrorCode.UNRELEASED_INSTANCE_ID: (False, "Another member still holds this instance id and has to leave the "
                                              "group first."),
    ErrorCode.UNSUPPORTED_ASSIGNOR: (False, "The group does not support the requested assignor or any of its "
                                            "versions."),
    ErrorCode.STALE_MEMBER_EPOCH: (False, "The member epoch is out of date; retry once a heartbeat has delivered the "
                                          "current epoch."),
    ErrorCode.MISMATCHED_ENDPOINT_TYPE: (False, "The request reached an endpoint of the wrong kind (for example a "
                                                "broker instead of a controller)."),
    ErrorCode.UNSUPPORTED_ENDPOINT_TYPE: (False, "The requested endpoint type is not supported."),
    ErrorCode.UNKNOWN_CONTROLLER_ID: (False, "No controller with this id is known."),
    ErrorCode.UNKNOWN_SUBSCRIPTION_ID: (False, "The telemetry push used a subscription id that is unknown or out of "
                                               "date."),
    ErrorCode.TELEMETRY_TOO_LARGE: (False, "The telemetry push exceeds the size the broker accepts."),
    ErrorCode.INVALID_REGISTRATION: (False, "The controller rejected the broker's registration as invalid."),
    ErrorCode.TRANSACTION_ABORTABLE: (False, "The transaction ran into an error; aborting it lets the producer keep "
                                             "its transactional id."),
    ErrorCode.INVALID_RECORD_STATE: (False, "The record is not in a state that allows this acknowledgement."),
    ErrorCode.SHARE_SESSION_NOT_FOUND: (True, "The broker has no share session matching the request."),
    ErrorCode.INVALID_SHARE_SESSION_EPOCH: (True, "The share session epoch does not match the broker's."),
    ErrorCode.FENCED_STATE_EPOCH: (False, "The share-group state epoch in the request does not match the share "
                                          "coordinator's, so it was refused."),
    ErrorCode.INVALID_VOTER_KEY: (False, "The voter key does not match the key of the replica that received it."),
    ErrorCode.DUPLICATE_VOTER: (False, "The voter already belongs to the voter set."),
    ErrorCode.VOTER_NOT_FOUND: (False, "The voter does not belong to the voter set."),
    ErrorCode.INVALID_REGULAR_EXPRESSION: (False, "The topic regular expression in the subscription does not compile."),
    ErrorCode.REBOOTSTRAP_REQUIRED: (False, "The client's cluster metadata is stale; it should start over from its "
                                            "bootstrap servers."),
    ErrorCode.STREAMS_INVALID_TOPOLOGY: (False, "The streams topology supplied is not valid."),
    ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH: (False, "The streams topology epoch supplied is not valid."),
    ErrorCode.STREAMS_TOPOLOGY_FENCED: (False, "The streams topology epoch supplied is older than the group's."),
    ErrorCode.SHARE_SESSION_LIMIT_REACHED: (True, "The broker already holds as many share sessions as it allows."),
}

_BY_CODE: dict[int, ErrorCode] = {member._value_: member for member in ErrorCode}


def is_retriable(code: int) -> bool:
    """Whether a request that failed with wire ``code`` may succeed if simply sent again.

    Accepts an :class:`ErrorCode` or a raw ``int``. ``NONE`` and unknown codes answer ``False``
    (unknown codes count as ``UNKNOWN_SERVER_ERROR``, which Kafka does not retry).
    """
    return ErrorCode.from_code(code).retriable


class KafkaError(Exception):
    """A failure that a Kafka response reports as ``error_code`` (and ``error_message``).

    ``message`` defaults to the code's own description; ``retriable`` is the code's.
    """

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        self.error_code = error_code
        self.message = message if message is not None else error_code.message
        super().__init__(self.message)

    @property
    def retriable(self) -> bool:
        return self.error_code.retriable

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.error_code.name}, {self.message!r})"
