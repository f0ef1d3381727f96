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

    Each member is declared as ``NAME = (code, retriable, message)``.
    """

    retriable: bool
    message: str

    def __new__(cls, code: int, retriable: bool, message: str) -> ErrorCode:
        """Build a member whose integer value is ``code`` and attach its attributes."""
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.message = message
        return member

    UNKNOWN_SERVER_ERROR = (-1, False, "The server hit an unexpected failure while handling the request.")
    NONE = (0, False, "No error: the operation succeeded.")
    OFFSET_OUT_OF_RANGE = (1, False, "The requested offset lies outside the offsets the server currently keeps for the "
                                     "partition.")
    CORRUPT_MESSAGE = (2, True, "A record failed its CRC check, has an invalid size, has a null key on a compacted "
                                "topic, or is otherwise damaged.")
    UNKNOWN_TOPIC_OR_PARTITION = (3, True, "This broker does not host the requested topic or partition.")
    INVALID_FETCH_SIZE = (4, False, "The fetch size in the request is not valid.")
    LEADER_NOT_AVAILABLE = (5, True, "The partition currently has no leader, typically because a leader election is "
                                     "under way.")
    NOT_LEADER_OR_FOLLOWER = (6, True, "This broker is not the partition leader (for leader-only requests) or not a "
                                       "replica of the partition at all.")
    REQUEST_TIMED_OUT = (7, True, "The request did not complete within its timeout.")
    BROKER_NOT_AVAILABLE = (8, False, "The broker in question is currently unavailable.")
    REPLICA_NOT_AVAILABLE = (9, True, "A replica of the requested partition is not available.")
    MESSAGE_TOO_LARGE = (10, False, "A record or batch exceeds the largest size the broker accepts.")
    STALE_CONTROLLER_EPOCH = (11, False, "The request carried an old controller epoch; the controller has moved to "
                                         "another broker.")
    OFFSET_METADATA_TOO_LARGE = (12, False, "The metadata string attached to a committed offset is too long.")
    NETWORK_EXCEPTION = (13, True, "The connection was closed before a response arrived.")
    COORDINATOR_LOAD_IN_PROGRESS = (14, True, "The coordinator is still loading its state and cannot serve the request "
                                              "yet.")
    COORDINATOR_NOT_AVAILABLE = (15, True, "No coordinator is currently available for this group or transactional id.")
    NOT_COORDINATOR = (16, True, "This broker is not the coordinator for the given group or transactional id.")
    INVALID_TOPIC_EXCEPTION = (17, False, "The request referred to a topic whose name is invalid or that may not be "
                                          "used this way.")
    RECORD_LIST_TOO_LARGE = (18, False, "A record batch is larger than the configured log segment size.")
    NOT_ENOUGH_REPLICAS = (19, True, "Records were refused because fewer in-sync replicas exist than "
                                     "min.insync.replicas requires.")
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (20, True, "Records were appended to the log but reached fewer in-sync replicas "
                                                  "than required.")
    INVALID_REQUIRED_ACKS = (21, False, "The produce request asked for an unsupported acks value.")
    ILLEGAL_GENERATION = (22, False, "The group generation id in the request is not the current one.")
    INCONSISTENT_GROUP_PROTOCOL = (23, False, "The member's protocol type or protocols do not match the group, or the "
                                              "first member sent none.")
    INVALID_GROUP_ID = (24, False, "The group id is not valid (for example empty).")
    UNKNOWN_MEMBER_ID = (25, False, "The coordinator does not know this member id.")
    INVALID_SESSION_TIMEOUT = (26, False, "The session timeout is outside the broker's "
                                          "group.min/max.session.timeout.ms range.")
    REBALANCE_IN_PROGRESS = (27, False, "The group is rebalancing; the member has to rejoin.")
    INVALID_COMMIT_OFFSET_SIZE = (28, False, "The offset commit is too large to be stored.")
    TOPIC_AUTHORIZATION_FAILED = (29, False, "The principal is not authorized to access the topic.")
    GROUP_AUTHORIZATION_FAILED = (30, False, "The principal is not authorized to access the group.")
    CLUSTER_AUTHORIZATION_FAILED = (31, False, "The principal is not authorized to perform the cluster-level "
                                               "operation.")
    INVALID_TIMESTAMP = (32, False, "A record timestamp is outside the range the broker accepts.")
    UNSUPPORTED_SASL_MECHANISM = (33, False, "The SASL mechanism the client asked for is not enabled on this broker.")
    ILLEGAL_SASL_STATE = (34, False, "The request is not allowed at this point of the SASL exchange.")
    UNSUPPORTED_VERSION = (35, False, "The broker does not support this version of the API.")
    TOPIC_ALREADY_EXISTS = (36, False, "Creation failed: a topic of that name exists already.")
    INVALID_PARTITIONS = (37, False, "The requested partition count is not valid (for example below 1).")
    INVALID_REPLICATION_FACTOR = (38, False, "The replication factor must be at least 1 and at most the number of live "
                                             "brokers.")
    INVALID_REPLICA_ASSIGNMENT = (39, False, "The explicit replica assignment is not valid.")
    INVALID_CONFIG = (40, False, "A configuration value in the request is not valid.")
    NOT_CONTROLLER = (41, True, "This broker is not the active controller.")
    INVALID_REQUEST = (42, False, "The request is malformed or not understood; the client library or broker version is "
                                  "probably at fault.")
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (43, False, "The request needs a newer message format than the one the topic "
                                                 "uses.")
    POLICY_VIOLATION = (44, False, "The request breaks a policy configured on the broker.")
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, False, "The broker received a producer sequence number out of order.")
    DUPLICATE_SEQUENCE_NUMBER = (46, False, "The broker received a producer sequence number it has already seen.")
    INVALID_PRODUCER_EPOCH = (47, False, "The producer used an epoch older than the current one.")
    INVALID_TXN_STATE = (48, False, "The transactional operation is not allowed in the transaction's current state.")
    INVALID_PRODUCER_ID_MAPPING = (49, False, "The producer id is not the one currently assigned to this transactional "
                                              "id.")
    INVALID_TRANSACTION_TIMEOUT = (50, False, "The transaction timeout exceeds the broker's "
                                              "transaction.max.timeout.ms.")
    CONCURRENT_TRANSACTIONS = (51, True, "Another operation on the same transaction is still in progress.")
    TRANSACTION_COORDINATOR_FENCED = (52, False, "The transaction coordinator sending transaction markers is no longer "
                                                 "the current one for the producer.")
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, False, "The principal is not authorized to use the transactional id.")
    SECURITY_DISABLED = (54, False, "Security features are not enabled on the broker.")
    OPERATION_NOT_ATTEMPTED = (55, False, "The broker skipped this item because another part of the batched request "
                                          "failed.")
    KAFKA_STORAGE_ERROR = (56, True, "The broker hit a disk error while accessing the log.")
    LOG_DIR_NOT_FOUND = (57, False, "The requested log directory is not configured on the broker.")
    SASL_AUTHENTICATION_FAILED = (58, False, "Authentication over SASL did not succeed (bad credentials or a failed "
                                             "exchange).")
    UNKNOWN_PRODUCER_ID = (59, False, "The broker has no state for this producer id, for example because its records "
                                      "were all removed by retention.")
    REASSIGNMENT_IN_PROGRESS = (60, False, "The operation conflicts with a partition reassignment that is currently "
                                           "running.")
    DELEGATION_TOKEN_AUTH_DISABLED = (61, False, "The delegation token feature is turned off on this cluster.")
    DELEGATION_TOKEN_NOT_FOUND = (62, False, "The delegation token does not exist on the server.")
    DELEGATION_TOKEN_OWNER_MISMATCH = (63, False, "The principal is not the owner or a renewer of the delegation "
                                                  "token.")
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = (64, False, "Delegation token requests are refused on plaintext, one-way "
                                                       "SSL or token-authenticated connections.")
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = (65, False, "The principal is not authorized for the delegation token "
                                                        "operation.")
    DELEGATION_TOKEN_EXPIRED = (66, False, "The delegation token is past its expiry time.")
    INVALID_PRINCIPAL_TYPE = (67, False, "The broker does not support the principal type given.")
    NON_EMPTY_GROUP = (68, False, "The group still has members.")
    GROUP_ID_NOT_FOUND = (69, False, "No group with this id exists.")
    FETCH_SESSION_ID_NOT_FOUND = (70, True, "The broker has no fetch session with this id.")
    INVALID_FETCH_SESSION_EPOCH = (71, True, "The fetch session epoch does not match the broker's.")
    LISTENER_NOT_FOUND = (72, True, "The partition leader has no listener matching the one the metadata request "
                                    "arrived on.")
    TOPIC_DELETION_DISABLED = (73, False, "Deleting topics is disabled on this cluster.")
    FENCED_LEADER_EPOCH = (74, True, "The request's leader epoch is behind the one this broker knows.")
    UNKNOWN_LEADER_EPOCH = (75, True, "The request's leader epoch is ahead of the one this broker knows.")
    UNSUPPORTED_COMPRESSION_TYPE = (76, False, "The client cannot handle the compression type used by the partition.")
    STALE_BROKER_EPOCH = (77, False, "The broker epoch in the request is out of date.")
    OFFSET_NOT_AVAILABLE = (78, True, "The new leader's high watermark has not caught up yet, so the offset cannot be "
                                      "served safely.")
    MEMBER_ID_REQUIRED = (79, False, "The member must rejoin with the member id the coordinator just assigned to it.")
    PREFERRED_LEADER_NOT_AVAILABLE = (80, True, "The preferred leader of the partition is not available.")
    GROUP_MAX_SIZE_REACHED = (81, False, "The group already holds its maximum number of members.")
    FENCED_INSTANCE_ID = (82, False, "Another member with the same group.instance.id but a different member id has "
                                     "taken over this static membership.")
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (83, True, "No replica eligible to become leader is available.")
    ELECTION_NOT_NEEDED = (84, True, "The partition already has the desired leader; no election was needed.")
    NO_REASSIGNMENT_IN_PROGRESS = (85, False, "There is no partition reassignment to act on.")
    GROUP_SUBSCRIBED_TO_TOPIC = (86, False, "Offsets of a topic cannot be deleted while the group is actively "
                                            "subscribed to it.")
    INVALID_RECORD = (87, False, "The broker's validation rejected the record.")
    UNSTABLE_OFFSET_COMMIT = (88, True, "Pending transactional offset commits must complete before offsets can be "
                                        "fetched.")
    THROTTLING_QUOTA_EXCEEDED = (89, True, "The request would exceed the throttling quota.")
    PRODUCER_FENCED = (90, False, "A newer producer with the same transactional id has fenced this one.")
    RESOURCE_NOT_FOUND = (91, False, "A resource named in the request does not exist.")
    DUPLICATE_RESOURCE = (92, False, "The request named the same resource more than once.")
    UNACCEPTABLE_CREDENTIAL = (93, False, "The requested credential does not meet the acceptance criteria.")
    INCONSISTENT_VOTER_SET = (94, False, "The sender or the receiver of a voter-only request is not one of the "
                                         "expected voters.")
    INVALID_UPDATE_VERSION = (95, False, "The update version in the request is not valid.")
    FEATURE_UPDATE_FAILED = (96, False, "Finalized features could not be updated because of an unexpected server "
                                        "error.")
    PRINCIPAL_DESERIALIZATION_FAILURE = (97, False, "A forwarded request's principal could not be deserialized; the "
                                                    "cluster's security setup is inconsistent.")
    SNAPSHOT_NOT_FOUND = (98, False, "The requested snapshot does not exist.")
    POSITION_OUT_OF_RANGE = (99, False, "The requested position is negative or beyond the end of the snapshot.")
    UNKNOWN_TOPIC_ID = (100, True, "This broker does not host a topic with this topic id.")
    DUPLICATE_BROKER_REGISTRATION = (101, False, "Another broker has already registered with this broker id.")
    BROKER_ID_NOT_REGISTERED = (102, False, "No broker is registered with this broker id.")
    INCONSISTENT_TOPIC_ID = (103, True, "The topic id in the request differs from the topic id of the log.")
    INCONSISTENT_CLUSTER_ID = (104, False, "The cluster id in the request differs from the server's.")
    TRANSACTIONAL_ID_NOT_FOUND = (105, False, "No transaction state exists for this transactional id.")
    FETCH_SESSION_TOPIC_ID_ERROR = (106, True, "The fetch session mixed or changed topic ids inconsistently.")
    INELIGIBLE_REPLICA = (107, False, "The proposed ISR contains a replica that is not eligible.")
    NEW_LEADER_ELECTED = (108, False, "The partition state was updated, but meanwhile a different leader was elected.")
    OFFSET_MOVED_TO_TIERED_STORAGE = (109, False, "The requested offset is only available from tiered (remote) "
                                                  "storage.")
    FENCED_MEMBER_EPOCH = (110, False, "The coordinator fenced the member epoch; the member must give up its "
                                       "partitions and rejoin.")
    UNRELEASED_INSTANCE_ID = (111, False, "Another member still holds this instance id and has to leave the group "
                                          "first.")
    UNSUPPORTED_ASSIGNOR = (112, False, "The group does not support the requested assignor or any of its versions.")
    STALE_MEMBER_EPOCH = (113, False, "The member epoch is out of date; retry once a heartbeat has delivered the "
                                      "current epoch.")
    MISMATCHED_ENDPOINT_TYPE = (114, False, "The request reached an endpoint of the wrong kind (for example a broker "
                                            "instead of a controller).")
    UNSUPPORTED_ENDPOINT_TYPE = (115, False, "The requested endpoint type is not supported.")
    UNKNOWN_CONTROLLER_ID = (116, False, "No controller with this id is known.")
    UNKNOWN_SUBSCRIPTION_ID = (117, False, "The telemetry push used a subscription id that is unknown or out of date.")
    TELEMETRY_TOO_LARGE = (118, False, "The telemetry push exceeds the size the broker accepts.")
    INVALID_REGISTRATION = (119, False, "The controller rejected the broker's registration as invalid.")
    TRANSACTION_ABORTABLE = (120, False, "The transaction ran into an error; aborting it lets the producer keep its "
                                         "transactional id.")
    INVALID_RECORD_STATE = (121, False, "The record is not in a state that allows this acknowledgement.")
    SHARE_SESSION_NOT_FOUND = (122, True, "The broker has no share session matching the request.")
    INVALID_SHARE_SESSION_EPOCH = (123, True, "The share session epoch does not match the broker's.")
    FENCED_STATE_EPOCH = (124, False, "The share-group state epoch in the request does not match the share "
                                      "coordinator's, so it was refused.")
    INVALID_VOTER_KEY = (125, False, "The voter key does not match the key of the replica that received it.")
    DUPLICATE_VOTER = (126, False, "The voter already belongs to the voter set.")
    VOTER_NOT_FOUND = (127, False, "The voter does not belong to the voter set.")
    INVALID_REGULAR_EXPRESSION = (128, False, "The topic regular expression in the subscription does not compile.")
    REBOOTSTRAP_REQUIRED = (129, False, "The client's cluster metadata is stale; it should start over from its "
                                        "bootstrap servers.")
    STREAMS_INVALID_TOPOLOGY = (130, False, "The streams topology supplied is not valid.")
    STREAMS_INVALID_TOPOLOGY_EPOCH = (131, False, "The streams topology epoch supplied is not valid.")
    STREAMS_TOPOLOGY_FENCED = (132, False, "The streams topology epoch supplied is older than the group's.")
    SHARE_SESSION_LIMIT_REACHED = (133, True, "The broker already holds as many share sessions as it allows.")

    @classmethod
    def from_code(cls, code: int) -> ErrorCode:
        """Return the member for a wire ``code``, tolerating codes this table does not know.

        Unknown codes (a newer peer, or garbage) map to :attr:`UNKNOWN_SERVER_ERROR`, exactly as
        ``Errors.forCode`` does in the Java client; the original number is not preserved, so keep the
        decoded ``int`` if you need to log it. Never raises.
        """
        return _BY_CODE.get(code, cls.UNKNOWN_SERVER_ERROR)


_BY_CODE: dict[int, ErrorCode] = {member.value: member for member in ErrorCode}


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
