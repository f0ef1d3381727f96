"""The error-code table: complete, unique, and in agreement with Kafka, kafka-python and librdkafka.

A client decides whether to retry from ``retriable`` and logs ``name``; a wrong number, name or flag
is a bug a user would see, so the whole table is checked, not a sample.
"""

from __future__ import annotations

import pytest

from kafkalite.protocol.errors import _DETAILS, ErrorCode, is_retriable

# Codes whose Java exception class extends RetriableException in Kafka 4.x, derived by walking each
# Errors.java constant's exception class up its `extends` chain. Asserted in both directions.
JAVA_RETRIABLE = frozenset(
    {
        "CORRUPT_MESSAGE",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "NOT_LEADER_OR_FOLLOWER",
        "REQUEST_TIMED_OUT",
        "REPLICA_NOT_AVAILABLE",
        "NETWORK_EXCEPTION",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "NOT_CONTROLLER",
        "CONCURRENT_TRANSACTIONS",
        "KAFKA_STORAGE_ERROR",
        "FETCH_SESSION_ID_NOT_FOUND",
        "INVALID_FETCH_SESSION_EPOCH",
        "LISTENER_NOT_FOUND",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "OFFSET_NOT_AVAILABLE",
        "PREFERRED_LEADER_NOT_AVAILABLE",
        "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        "ELECTION_NOT_NEEDED",
        "UNSTABLE_OFFSET_COMMIT",
        "THROTTLING_QUOTA_EXCEEDED",
        "UNKNOWN_TOPIC_ID",
        "INCONSISTENT_TOPIC_ID",
        "FETCH_SESSION_TOPIC_ID_ERROR",
        "SHARE_SESSION_NOT_FOUND",
        "INVALID_SHARE_SESSION_EPOCH",
        "SHARE_SESSION_LIMIT_REACHED",
    }
)

# kafka-python spells a few constants the old way; ours follow Kafka's current Errors.java.
KAFKA_PYTHON_RENAMES = {
    "UNKNOWN": "UNKNOWN_SERVER_ERROR",
    "NO_ERROR": "NONE",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",  # renamed in Kafka 2.7 (KIP-392)
    "MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
    "INVALID_REPLICATION_ASSIGNMENT": "INVALID_REPLICA_ASSIGNMENT",
}

# Where kafka-python's retriable flag departs from the Java client's. Java's CorruptRecordException
# extends RetriableException; kafka-python's CorruptRecordError does not.
KAFKA_PYTHON_RETRIABLE_DIFFERENCES = frozenset({"CORRUPT_MESSAGE"})

# librdkafka (RD_KAFKA_RESP_ERR_*) abbreviates some names.
LIBRDKAFKA_RENAMES = {
    "UNKNOWN": "UNKNOWN_SERVER_ERROR",
    "NO_ERROR": "NONE",
    "INVALID_MSG": "CORRUPT_MESSAGE",
    "UNKNOWN_TOPIC_OR_PART": "UNKNOWN_TOPIC_OR_PARTITION",
    "INVALID_MSG_SIZE": "INVALID_FETCH_SIZE",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
    "MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "STALE_CTRL_EPOCH": "STALE_CONTROLLER_EPOCH",
    "TOPIC_EXCEPTION": "INVALID_TOPIC_EXCEPTION",
}


def test_every_code_and_name_is_unique() -> None:
    # An IntEnum silently turns a repeated value into an alias, so compare against __members__.
    assert len(ErrorCode.__members__) == len(list(ErrorCode))
    codes = [member.value for member in ErrorCode]
    assert len(codes) == len(set(codes))


def test_table_covers_kafka_4_codes_contiguously() -> None:
    codes = sorted(member.value for member in ErrorCode)
    assert codes == list(range(-1, 134))
    assert len(ErrorCode) == 135


@pytest.mark.parametrize(
    ("name", "code", "retriable"),
    [
        ("UNKNOWN_SERVER_ERROR", -1, False),
        ("NONE", 0, False),
        ("OFFSET_OUT_OF_RANGE", 1, False),
        ("CORRUPT_MESSAGE", 2, True),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
        ("NOT_LEADER_OR_FOLLOWER", 6, True),
        ("REQUEST_TIMED_OUT", 7, True),
        ("BROKER_NOT_AVAILABLE", 8, False),
        ("MESSAGE_TOO_LARGE", 10, False),
        ("NETWORK_EXCEPTION", 13, True),
        ("NOT_COORDINATOR", 16, True),
        ("INVALID_TOPIC_EXCEPTION", 17, False),
        ("ILLEGAL_GENERATION", 22, False),
        ("UNKNOWN_MEMBER_ID", 25, False),
        ("REBALANCE_IN_PROGRESS", 27, False),
        ("TOPIC_AUTHORIZATION_FAILED", 29, False),
        ("UNSUPPORTED_VERSION", 35, False),
        ("TOPIC_ALREADY_EXISTS", 36, False),
        ("NOT_CONTROLLER", 41, True),
        ("INVALID_REQUEST", 42, False),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45, False),
        ("DUPLICATE_SEQUENCE_NUMBER", 46, False),
        ("INVALID_PRODUCER_EPOCH", 47, False),
        ("CONCURRENT_TRANSACTIONS", 51, True),
        ("KAFKA_STORAGE_ERROR", 56, True),
        ("UNKNOWN_PRODUCER_ID", 59, False),
        ("FETCH_SESSION_ID_NOT_FOUND", 70, True),
        ("FENCED_LEADER_EPOCH", 74, True),
        ("UNKNOWN_LEADER_EPOCH", 75, True),
        ("MEMBER_ID_REQUIRED", 79, False),
        ("FENCED_INSTANCE_ID", 82, False),
        ("PRODUCER_FENCED", 90, False),
        ("POSITION_OUT_OF_RANGE", 99, False),
        ("UNKNOWN_TOPIC_ID", 100, True),
        ("FENCED_MEMBER_EPOCH", 110, False),
        ("STALE_MEMBER_EPOCH", 113, False),
        ("INVALID_REGISTRATION", 119, False),
        ("TRANSACTION_ABORTABLE", 120, False),
        ("INVALID_RECORD_STATE", 121, False),
        ("SHARE_SESSION_NOT_FOUND", 122, True),
        ("INVALID_SHARE_SESSION_EPOCH", 123, True),
        ("INVALID_REGULAR_EXPRESSION", 128, False),
        ("REBOOTSTRAP_REQUIRED", 129, False),
        ("STREAMS_INVALID_TOPOLOGY", 130, False),
        ("STREAMS_INVALID_TOPOLOGY_EPOCH", 131, False),
        ("STREAMS_TOPOLOGY_FENCED", 132, False),
        ("SHARE_SESSION_LIMIT_REACHED", 133, True),
    ],
)
def test_spot_checks_against_kafka(name: str, code: int, retriable: bool) -> None:
    member = ErrorCode[name]
    assert member == code
    assert member.value == code
    assert member.retriable is retriable
    assert is_retriable(code) is retriable


def test_retriable_flags_match_java_exactly() -> None:
    assert JAVA_RETRIABLE <= set(ErrorCode.__members__)
    actual = {member.name for member in ErrorCode if member.retriable}
    assert actual == JAVA_RETRIABLE


def test_every_member_has_a_one_line_description() -> None:
    for member in ErrorCode:
        assert isinstance(member.retriable, bool), member.name
        assert isinstance(member.message, str), member.name
        assert member.message.strip(), member.name
        assert "\n" not in member.message, member.name


def test_the_details_table_names_every_member_once_in_order() -> None:
    assert list(_DETAILS) == list(ErrorCode)


def test_members_behave_as_wire_integers() -> None:
    assert isinstance(ErrorCode.NOT_LEADER_OR_FOLLOWER, int)
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER + 0 == 6
    assert ErrorCode(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ErrorCode.NONE == 0
    assert not ErrorCode.NONE  # falsy, like the 0 it encodes


def test_from_code_round_trips_every_known_code() -> None:
    for member in ErrorCode:
        assert ErrorCode.from_code(member.value) is member
        assert ErrorCode.from_code(int(member)) is member


@pytest.mark.parametrize("unknown_code", [134, 999, 32767, -2, -32768])
def test_unknown_codes_are_tolerated(unknown_code: int) -> None:
    assert ErrorCode.from_code(unknown_code) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert is_retriable(unknown_code) is False
    # The constructor stays strict: only from_code papers over unknown codes.
    with pytest.raises(ValueError):
        ErrorCode(unknown_code)


def test_is_retriable_accepts_members_and_plain_ints() -> None:
    assert is_retriable(ErrorCode.LEADER_NOT_AVAILABLE)
    assert is_retriable(5)
    assert not is_retriable(ErrorCode.NONE)
    assert not is_retriable(ErrorCode.UNSUPPORTED_VERSION)


def test_every_code_kafka_python_knows_matches_ours() -> None:
    kafka_errors = pytest.importorskip("kafka.errors")
    for rename_target in KAFKA_PYTHON_RENAMES.values():
        assert rename_target in ErrorCode.__members__

    checked = 0
    for error_class in kafka_errors.kafka_errors.values():
        if error_class.errno is None:  # abstract bases such as AuthorizationError
            continue
        their_name = error_class.message
        expected_name = KAFKA_PYTHON_RENAMES.get(their_name, their_name)
        assert expected_name in ErrorCode.__members__, f"{their_name} ({error_class.errno}) missing"
        ours = ErrorCode[expected_name]
        assert ours.value == error_class.errno, expected_name
        if expected_name not in KAFKA_PYTHON_RETRIABLE_DIFFERENCES:
            assert ours.retriable == error_class.retriable, expected_name
        checked += 1
    assert checked >= 120  # guard against the cross-check passing vacuously


def test_every_broker_code_librdkafka_knows_matches_ours() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka_error = confluent_kafka.KafkaError
    checked = 0
    for their_name in dir(kafka_error):
        value = getattr(kafka_error, their_name)
        # librdkafka's local (client-side) errors are all below -1; -1 and up are broker codes.
        if not their_name.isupper() or not isinstance(value, int) or value < -1:
            continue
        expected_name = LIBRDKAFKA_RENAMES.get(their_name, their_name)
        assert ErrorCode.from_code(value).value == value, f"{their_name} ({value}) missing"
        assert ErrorCode(value).name == expected_name, their_name
        checked += 1
    assert checked >= 100
