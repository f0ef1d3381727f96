"""Client-side assignors: the consumer protocol's bytes, and the Java client's assignments.

Expected assignments are those of the Java client's ``RangeAssignorTest``, ``RoundRobinAssignorTest``
and ``AbstractStickyAssignorTest`` for the same inputs; the rest checks what every assignment must be
(each partition once, balanced, sticky, cooperative moves in two rounds).
"""

from __future__ import annotations

import random
import struct

import pytest

from kafkalite.client.config import ConfigError
from kafkalite.client.consumer.assignors import (
    Assignment,
    GroupMember,
    RangeAssignor,
    RoundRobinAssignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkalite.client.consumer.classic import assignors_from_config
from kafkalite.client.consumer.sticky import (
    CooperativeStickyAssignor,
    MemberData,
    StickyAssignor,
    decode_sticky_user_data,
    encode_sticky_user_data,
    java_hash_order,
    sticky_assign,
)
from kafkalite.client.metadata import TopicPartition


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def member(member_id: str, topics: list[str], owned: list[TopicPartition] | None = None, generation: int = -1,
           instance: str | None = None, user_data: bytes | None = None) -> GroupMember:
    return GroupMember(member_id, Subscription(tuple(topics), user_data, tuple(owned or ()), generation), instance)


def partitions_of(assignment: dict[str, Assignment]) -> dict[str, list[TopicPartition]]:
    return {member_id: list(value.partitions) for member_id, value in assignment.items()}


# --- the wire format -------------------------------------------------------------------------------------


def test_subscription_round_trips_at_every_version() -> None:
    subscription = Subscription(("a", "b"), b"\x00\x01", (tp("a", 0), tp("a", 1), tp("b", 2)), 7, "rack-1")
    assert decode_subscription(encode_subscription(subscription)) == subscription
    v0 = decode_subscription(encode_subscription(subscription, 0))
    assert v0 == Subscription(("a", "b"), b"\x00\x01")
    v1 = decode_subscription(encode_subscription(subscription, 1))
    assert v1.owned_partitions == subscription.owned_partitions and v1.generation_id == -1


def test_subscription_as_kafka_python_and_java_write_it() -> None:
    # version 0 as kafka-python writes it: topics ["t"], null user data
    v0 = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    assert decode_subscription(v0) == Subscription(("t",))
    # a newer version than we know is read as ours: fields are only appended
    newer = struct.pack(">h", 9) + encode_subscription(Subscription(("t",), None, (), 3, None))[2:] + b"\x07\x07"
    assert decode_subscription(newer).generation_id == 3


def test_assignment_round_trips_and_empty_bytes_mean_nothing() -> None:
    assignment = Assignment((tp("a", 0), tp("a", 3), tp("b", 1)), b"user")
    assert decode_assignment(encode_assignment(assignment)) == assignment
    assert decode_assignment(encode_assignment(assignment, 0)) == assignment
    assert decode_assignment(b"") == Assignment(())


def test_config_names_and_java_class_names() -> None:
    names = [assignor.name for assignor in assignors_from_config(
        "org.apache.kafka.clients.consumer.RangeAssignor, roundrobin,sticky,CooperativeStickyAssignor")]
    assert names == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    with pytest.raises(ConfigError, match="fancy"):
        assignors_from_config("fancy")
    with pytest.raises(ConfigError, match="twice"):
        assignors_from_config(["range", "range"])


# --- range and roundrobin (RangeAssignorTest, RoundRobinAssignorTest) -----------------------------------


def test_range_two_consumers_two_topics_six_partitions() -> None:
    result = partitions_of(RangeAssignor().assign({"t1": 3, "t2": 3}, {
        "consumer1": member("consumer1", ["t1", "t2"]), "consumer2": member("consumer2", ["t1", "t2"])}))
    assert result == {"consumer1": [tp("t1", 0), tp("t1", 1), tp("t2", 0), tp("t2", 1)],
                      "consumer2": [tp("t1", 2), tp("t2", 2)]}


def test_range_mixed_subscriptions() -> None:
    result = partitions_of(RangeAssignor().assign({"topic1": 3, "topic2": 2}, {
        "consumer1": member("consumer1", ["topic1"]), "consumer2": member("consumer2", ["topic1", "topic2"]),
        "consumer3": member("consumer3", ["topic1"])}))
    assert result == {"consumer1": [tp("topic1", 0)], "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
                      "consumer3": [tp("topic1", 2)]}


def test_range_orders_static_members_by_instance_id_first() -> None:
    result = partitions_of(RangeAssignor().assign({"t": 3}, {
        "a-member": member("a-member", ["t"], instance="instance-2"),
        "b-member": member("b-member", ["t"], instance="instance-1"),
        "0-dynamic": member("0-dynamic", ["t"])}))
    assert result == {"b-member": [tp("t", 0)], "a-member": [tp("t", 1)], "0-dynamic": [tp("t", 2)]}


def test_range_leaves_out_unknown_topics_and_partitionless_members() -> None:
    result = partitions_of(RangeAssignor().assign({"t": 1}, {
        "c1": member("c1", ["t", "missing"]), "c2": member("c2", ["t"])}))
    assert result == {"c1": [tp("t", 0)], "c2": []}


def test_roundrobin_two_consumers_two_topics_six_partitions() -> None:
    result = partitions_of(RoundRobinAssignor().assign({"t1": 3, "t2": 3}, {
        "consumer1": member("consumer1", ["t1", "t2"]), "consumer2": member("consumer2", ["t1", "t2"])}))
    assert result == {"consumer1": [tp("t1", 0), tp("t1", 2), tp("t2", 1)],
                      "consumer2": [tp("t1", 1), tp("t2", 0), tp("t2", 2)]}


def test_roundrobin_mixed_subscriptions_skip_members_not_subscribed() -> None:
    result = partitions_of(RoundRobinAssignor().assign({"topic1": 3, "topic2": 2}, {
        "consumer1": member("consumer1", ["topic1"]), "consumer2": member("consumer2", ["topic1", "topic2"]),
        "consumer3": member("consumer3", ["topic1"])}))
    assert result == {"consumer1": [tp("topic1", 0)], "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
                      "consumer3": [tp("topic1", 2)]}


# --- sticky (AbstractStickyAssignorTest) ----------------------------------------------------------------


def data(topics: list[str], owned: list[TopicPartition] | None = None, generation: int | None = 1) -> MemberData:
    return MemberData(frozenset(topics), tuple(owned or ()), generation)


def test_java_hash_map_order_of_member_ids() -> None:
    # "consumerN" hash into buckets 12, 11, 10, 9 of a 16-bucket table: Java walks them backwards
    assert java_hash_order(["consumer1", "consumer2", "consumer3", "consumer4"]) == [
        "consumer4", "consumer3", "consumer2", "consumer1"]


def test_sticky_two_consumers_two_topics_six_partitions() -> None:
    result, transferring = sticky_assign({"topic1": 3, "topic2": 3}, {
        "consumer1": data(["topic1", "topic2"], generation=None),
        "consumer2": data(["topic1", "topic2"], generation=None)})
    assert result["consumer1"] == [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)]
    assert result["consumer2"] == [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]
    assert transferring == {}


def test_sticky_mixed_topic_subscriptions_use_the_general_algorithm() -> None:
    result, transferring = sticky_assign({"topic1": 3, "topic2": 2}, {
        "consumer1": data(["topic1"], generation=None), "consumer2": data(["topic1", "topic2"], generation=None),
        "consumer3": data(["topic1"], generation=None)})
    assert result == {"consumer1": [tp("topic1", 0), tp("topic1", 2)],
                      "consumer2": [tp("topic2", 0), tp("topic2", 1)], "consumer3": [tp("topic1", 1)]}
    assert transferring is None


def test_sticky_consumer_owning_min_quota_expected_max_quota() -> None:
    result, transferring = sticky_assign({"topic1": 2, "topic2": 3}, {
        "consumer1": data(["topic1", "topic2"], [tp("topic1", 0), tp("topic2", 1)]),
        "consumer2": data(["topic1", "topic2"], [tp("topic1", 1), tp("topic2", 2)])})
    assert result["consumer1"] == [tp("topic1", 0), tp("topic2", 1), tp("topic2", 0)]
    assert result["consumer2"] == [tp("topic1", 1), tp("topic2", 2)]
    assert transferring == {}


def test_sticky_more_max_quota_owners_than_expected() -> None:
    result, transferring = sticky_assign({"topic1": 2, "topic2": 2}, {
        "consumer1": data(["topic1", "topic2"], [tp("topic1", 0), tp("topic2", 0)]),
        "consumer2": data(["topic1", "topic2"], [tp("topic1", 1), tp("topic2", 1)]),
        "consumer3": data(["topic1", "topic2"])})
    assert transferring == {tp("topic2", 0): "consumer3"}
    assert result["consumer1"] == [tp("topic1", 0)]
    assert result["consumer2"] == [tp("topic1", 1), tp("topic2", 1)]
    assert result["consumer3"] == [tp("topic2", 0)]


def test_sticky_all_consumers_under_min_quota() -> None:
    result, transferring = sticky_assign({"topic1": 2, "topic2": 3}, {
        "consumer1": data(["topic1", "topic2"], [tp("topic1", 0)]),
        "consumer2": data(["topic1", "topic2"], [tp("topic1", 1)]), "consumer3": data(["topic1", "topic2"])})
    assert transferring == {}
    assert result["consumer1"] == [tp("topic1", 0), tp("topic2", 1)]
    assert result["consumer2"] == [tp("topic1", 1), tp("topic2", 2)]
    assert result["consumer3"] == [tp("topic2", 0)]


def test_sticky_add_and_remove_two_consumers_two_topics() -> None:
    topics = ["topic1", "topic2"]
    counts = {"topic1": 3, "topic2": 4}
    first, _ = sticky_assign(counts, {"consumer1": data(topics, generation=None),
                                      "consumer2": data(topics, generation=None)})
    assert first["consumer1"] == [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1), tp("topic2", 3)]
    assert first["consumer2"] == [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]
    second, transferring = sticky_assign(counts, {
        "consumer1": data(topics, first["consumer1"]), "consumer2": data(topics, first["consumer2"]),
        "consumer3": data(topics), "consumer4": data(topics)})
    assert transferring == {tp("topic1", 2): "consumer3", tp("topic2", 3): "consumer3", tp("topic2", 2): "consumer4"}
    assert second == {"consumer1": [tp("topic1", 0), tp("topic2", 1)], "consumer2": [tp("topic2", 0), tp("topic1", 1)],
                      "consumer3": [tp("topic1", 2), tp("topic2", 3)], "consumer4": [tp("topic2", 2)]}
    third, transferring = sticky_assign(counts, {"consumer3": data(topics, second["consumer3"]),
                                                 "consumer4": data(topics, second["consumer4"])})
    assert third["consumer3"] == [tp("topic1", 2), tp("topic2", 3), tp("topic1", 0), tp("topic2", 1)]
    assert third["consumer4"] == [tp("topic2", 2), tp("topic1", 1), tp("topic2", 0)]
    assert transferring == {}


def test_sticky_partition_claimed_twice_in_one_generation_is_taken_from_both() -> None:
    result, transferring = sticky_assign({"t": 2}, {
        "consumer1": data(["t"], [tp("t", 0), tp("t", 1)], 3), "consumer2": data(["t"], [tp("t", 1)], 3)})
    assert sorted(result["consumer1"] + result["consumer2"]) == [tp("t", 0), tp("t", 1)]
    assert result["consumer1"] == [tp("t", 0)]
    assert transferring == {tp("t", 1): "consumer2"}


def test_sticky_newer_generation_wins_a_conflicting_claim() -> None:
    result, _ = sticky_assign({"t": 2}, {"consumer1": data(["t"], [tp("t", 0), tp("t", 1)], 5),
                                         "consumer2": data(["t"], [tp("t", 1)], 4)})
    assert result["consumer1"] == [tp("t", 0)] or result["consumer1"] == [tp("t", 1)]
    assert set(result["consumer1"] + result["consumer2"]) == {tp("t", 0), tp("t", 1)}


def check_valid_and_balanced(counts: dict[str, int], members: dict[str, MemberData],
                             result: dict[str, list[TopicPartition]]) -> None:
    seen: dict[TopicPartition, str] = {}
    for member_id, partitions in result.items():
        for partition in partitions:
            assert partition.topic in members[member_id].topics, f"{member_id} got {partition} it does not subscribe"
            assert partition not in seen, f"{partition} given to {seen[partition]} and {member_id}"
            seen[partition] = member_id
    wanted = {tp(topic, index) for topic, count in counts.items() for index in range(count)
              if any(topic in member.topics for member in members.values())}
    assert set(seen) == wanted
    # balanced: no partition could move to a member with two fewer partitions
    for member_id, partitions in result.items():
        for other, other_partitions in result.items():
            if len(other_partitions) > len(partitions) + 1:
                assert not any(partition.topic in members[member_id].topics for partition in other_partitions), (
                    f"{member_id} ({len(partitions)}) could take from {other} ({len(other_partitions)})")


@pytest.mark.parametrize("seed", range(6))
def test_sticky_random_groups_stay_valid_balanced_and_sticky(seed: int) -> None:
    rng = random.Random(seed)
    counts = {f"topic{index:02d}": rng.randint(1, 6) for index in range(12)}
    names = sorted(counts)
    members = {f"consumer{index:02d}": data(rng.sample(names, rng.randint(1, 8)) if seed % 2 else names, None, None)
               for index in range(9)}
    result, _ = sticky_assign(counts, members)
    check_valid_and_balanced(counts, members, result)
    leaving = rng.sample(sorted(members), 3)
    again = {member_id: data(sorted(members[member_id].topics), result[member_id], 1)
             for member_id in members if member_id not in leaving}
    second, _ = sticky_assign(counts, again)
    check_valid_and_balanced(counts, again, second)
    if seed % 2 == 0:  # equal subscriptions: the survivors keep everything they had (they were below quota)
        for member_id in again:
            assert set(result[member_id]) <= set(second[member_id])


def test_eager_sticky_user_data_round_trips_and_carries_the_last_assignment() -> None:
    partitions = (tp("a", 0), tp("b", 3), tp("a", 2))
    assert decode_sticky_user_data(encode_sticky_user_data(partitions, 4)) == (
        (tp("a", 0), tp("a", 2), tp("b", 3)), 4)
    assignor = StickyAssignor()
    assert assignor.subscription_user_data(frozenset({"a"})) is None
    assignor.on_assignment(Assignment(partitions), 4)
    user_data = assignor.subscription_user_data(frozenset({"a", "b"}))
    assert user_data is not None
    result = partitions_of(StickyAssignor().assign({"a": 3, "b": 4}, {
        "m1": member("m1", ["a", "b"], user_data=user_data), "m2": member("m2", ["a", "b"])}))
    assert set(partitions) <= set(result["m1"])


# --- cooperative-sticky (CooperativeStickyAssignorTest) -------------------------------------------------


def test_cooperative_moves_a_partition_in_two_rounds() -> None:
    assignor = CooperativeStickyAssignor()
    generation = struct.pack(">i", 1)
    first = partitions_of(assignor.assign({"t": 3}, {
        "consumer1": member("consumer1", ["t"], [tp("t", 0), tp("t", 1), tp("t", 2)], 1, user_data=generation),
        "consumer2": member("consumer2", ["t"], [], 1, user_data=generation)}))
    # t-2 moves to consumer2: consumer1 revokes it now, nobody owns it this round
    assert first == {"consumer1": [tp("t", 0), tp("t", 1)], "consumer2": []}
    second = partitions_of(assignor.assign({"t": 3}, {
        "consumer1": member("consumer1", ["t"], first["consumer1"], 2),
        "consumer2": member("consumer2", ["t"], [], 2)}))
    assert second == {"consumer1": [tp("t", 0), tp("t", 1)], "consumer2": [tp("t", 2)]}


def test_cooperative_general_case_computes_the_moves_itself() -> None:
    assignor = CooperativeStickyAssignor()
    result = partitions_of(assignor.assign({"t1": 2, "t2": 2}, {
        "consumer1": member("consumer1", ["t1", "t2"], [tp("t1", 0), tp("t1", 1), tp("t2", 0), tp("t2", 1)], 3),
        "consumer2": member("consumer2", ["t1"], [], 3)}))
    owned_before = {tp("t1", 0), tp("t1", 1), tp("t2", 0), tp("t2", 1)}
    assert not (set(result["consumer2"]) & owned_before)  # nothing changes hands in one round
    assert set(result["consumer1"]) < owned_before


def test_cooperative_member_data_from_fields_or_user_data() -> None:
    with_fields = member("m", ["t"], [tp("t", 1)], 6)
    assert CooperativeStickyAssignor.member_data(with_fields) == MemberData(frozenset({"t"}), (tp("t", 1),), 6)
    from_user_data = member("m", ["t"], [tp("t", 1)], -1, user_data=struct.pack(">i", 5))
    assert CooperativeStickyAssignor.member_data(from_user_data).generation == 5
    assert CooperativeStickyAssignor.member_data(member("m", ["t"])).generation is None
