"""Group membership without sockets: KIP-848 reconciliation and the classic protocol's assignment steps.

A fake network client answers each request with the next canned response and records what was sent;
the coordinators are driven through ``poll()`` and their heartbeat task on a real event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from kafkalite.client.config import ConsumerConfig, parse_config
from kafkalite.client.consumer.assignors import Assignment
from kafkalite.client.consumer.classic import ClassicCoordinator, Generation, MemberState, _Joined
from kafkalite.client.consumer.fetcher import Fetcher
from kafkalite.client.consumer.membership import ConsumerGroupCoordinator, MembershipState
from kafkalite.client.consumer.sticky import CooperativeStickyAssignor
from kafkalite.client.consumer.subscription import OffsetResetStrategy, SubscriptionState
from kafkalite.client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kafkalite.protocol.messages import consumer_group_heartbeat_response as heartbeat

TOPIC_ID = uuid.uuid4()


def tp(partition: int) -> TopicPartition:
    return TopicPartition("t", partition)


class FakeConnection:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def version_for(self, request_type: Any, max_version: int | None = None, min_version: int | None = None,
                    allow_unstable: bool = False) -> int:
        return 1

    def send(self, request: Any, version: int | None = None, **_: Any) -> asyncio.Future[Any]:
        return self.client.answer(request)


class FakeClient:
    """Answers requests from ``responders`` (request type name -> callable(request) -> response)."""

    def __init__(self, responders: dict[str, Callable[[Any], Any]]) -> None:
        self.responders = responders
        self.sent: list[Any] = []
        self.metadata = ClusterMetadata()
        self.metadata.brokers = {1: BrokerInfo(1, "localhost", 9092)}
        self.metadata.topics = {"t": TopicInfo("t", TOPIC_ID, ErrorCode.NONE, False, tuple(
            PartitionInfo(index, 1, 0, (1,), (1,)) for index in range(4)))}

    def answer(self, request: Any) -> asyncio.Future[Any]:
        self.sent.append(request)
        future = asyncio.get_running_loop().create_future()
        future.set_result(self.responders[type(request).__name__](request))
        return future

    async def send(self, node_id: int, request: Any, **_: Any) -> Any:
        return await self.answer(request)

    async def connection(self, node_id: int) -> FakeConnection:
        return FakeConnection(self)

    async def coordinator(self, key_type: int, key: str, timeout_ms: float | None = None) -> int:
        return 1

    @staticmethod
    def dedicated_id(node_id: int) -> int:
        return -2_000_000 - node_id

    def forget_coordinator(self, key_type: int, key: str) -> None:
        pass

    def request_metadata_update(self) -> None:
        pass

    def add_topics(self, topics: Any) -> None:
        pass

    async def refresh_metadata(self, topics: Any = None, **_: Any) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assigned", [p.partition for p in partitions]))

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("revoked", [p.partition for p in partitions]))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("lost", [p.partition for p in partitions]))


def config(**keys: Any) -> ConsumerConfig:
    return parse_config(ConsumerConfig, {"group.id": "g", "enable.auto.commit": False, **keys})


def kip848(client: FakeClient, **keys: Any) -> tuple[ConsumerGroupCoordinator, SubscriptionState, Recorder]:
    cfg = config(group_protocol="consumer", **keys)
    subscriptions = SubscriptionState(OffsetResetStrategy.EARLIEST)
    listener = Recorder()
    subscriptions.subscribe(["t"], listener)
    fetcher = Fetcher(client, subscriptions, cfg)  # type: ignore[arg-type]
    return ConsumerGroupCoordinator(client, subscriptions, fetcher, cfg), subscriptions, listener  # type: ignore[arg-type]


def assignment(*partitions: int) -> heartbeat.Assignment:
    return heartbeat.Assignment(topic_partitions=[heartbeat.TopicPartitions(TOPIC_ID, list(partitions))])


async def settle(coordinator: Any, condition: Callable[[], bool]) -> None:
    for _ in range(200):
        await coordinator.poll(0)
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never held")


def test_kip848_member_joins_reconciles_and_acknowledges() -> None:
    answers = iter([
        ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=1, heartbeat_interval_ms=20,
                                       assignment=assignment(0, 1, 2)),
        ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=1, heartbeat_interval_ms=20),
        ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=2, heartbeat_interval_ms=20,
                                       assignment=assignment(1, 2)),
    ])
    last = ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=2, heartbeat_interval_ms=20)
    client = FakeClient({"ConsumerGroupHeartbeatRequest": lambda request: next(answers, last)})

    async def scenario() -> None:
        coordinator, subscriptions, listener = kip848(client)
        await settle(coordinator, lambda: subscriptions.assigned_partitions() == {tp(0), tp(1), tp(2)}
                     and coordinator.state is MembershipState.STABLE)
        assert listener.calls == [("assigned", [0, 1, 2])]
        await settle(coordinator, lambda: subscriptions.assigned_partitions() == {tp(1), tp(2)}
                     and coordinator.state is MembershipState.STABLE)
        assert listener.calls[1:] == [("revoked", [0]), ("assigned", [])]
        assert coordinator.member_epoch == 2 and coordinator.commit_identity()[:2] == (2, "m-1")
        await coordinator.close(0)

    asyncio.run(scenario())
    requests = [request for request in client.sent if isinstance(request, ConsumerGroupHeartbeatRequest)]
    join = requests[0]
    assert (join.member_epoch, join.subscribed_topic_names, join.rebalance_timeout_ms) == (0, ["t"], 300000)
    acknowledged = [request for request in requests if request.topic_partitions is not None
                    and request.member_epoch > 0]
    # the owned partitions travel only when they changed: after the first and the second reconciliation
    assert [sorted(p for entry in request.topic_partitions for p in entry.partitions) for request in acknowledged] == [
        [0, 1, 2], [1, 2]]
    assert all(request.subscribed_topic_names is None for request in requests[1:] if request.member_epoch > 0)
    assert requests[-1].member_epoch == -1  # close leaves the group


def test_kip848_fenced_member_loses_its_partitions_and_rejoins_at_epoch_zero() -> None:
    answers = iter([
        ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=3, heartbeat_interval_ms=20,
                                       assignment=assignment(0, 1)),
        ConsumerGroupHeartbeatResponse(error_code=ErrorCode.FENCED_MEMBER_EPOCH),
    ])
    rejoined = ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=5, heartbeat_interval_ms=20,
                                              assignment=assignment(1))
    client = FakeClient({"ConsumerGroupHeartbeatRequest": lambda request: next(answers, rejoined)})

    async def scenario() -> None:
        coordinator, subscriptions, listener = kip848(client)
        await settle(coordinator, lambda: ("lost", [0, 1]) in listener.calls
                     and subscriptions.assigned_partitions() == {tp(1)})
        assert listener.calls == [("assigned", [0, 1]), ("lost", [0, 1]), ("assigned", [1])]
        assert coordinator.member_epoch == 5
        await coordinator.close(0)

    asyncio.run(scenario())
    epochs = [request.member_epoch for request in client.sent]
    assert epochs[0] == 0 and 0 in epochs[2:]  # joined again from scratch after the fence


def test_kip848_static_member_leaves_with_epoch_minus_two() -> None:
    first = ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=1, heartbeat_interval_ms=20,
                                           assignment=assignment(0))
    steady = ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=1, heartbeat_interval_ms=20)
    answers = iter([first])
    client = FakeClient({"ConsumerGroupHeartbeatRequest": lambda request: next(answers, steady)})

    async def scenario() -> None:
        coordinator, subscriptions, _ = kip848(client, group_instance_id="static-1")
        await settle(coordinator, lambda: subscriptions.assigned_partitions() == {tp(0)})
        await coordinator.close(0)

    asyncio.run(scenario())
    assert client.sent[0].instance_id == "static-1"
    assert client.sent[-1].member_epoch == -2


def classic(protocol_assignors: list[Any]) -> tuple[ClassicCoordinator, SubscriptionState, Recorder]:
    client = FakeClient({})
    cfg = config()
    subscriptions = SubscriptionState(OffsetResetStrategy.EARLIEST)
    listener = Recorder()
    subscriptions.subscribe(["t"], listener)
    fetcher = Fetcher(client, subscriptions, cfg)  # type: ignore[arg-type]
    coordinator = ClassicCoordinator(client, subscriptions, fetcher, cfg, protocol_assignors)  # type: ignore[arg-type]
    return coordinator, subscriptions, listener


def test_cooperative_join_revokes_only_what_moves_and_rejoins() -> None:
    async def scenario() -> None:
        coordinator, subscriptions, listener = classic([CooperativeStickyAssignor()])
        subscriptions.set_assignment([tp(0), tp(1)])
        kept = subscriptions.state(tp(1))
        kept.seek(42)
        coordinator.generation = Generation(4, "m-1", "cooperative-sticky")
        coordinator.state = MemberState.STABLE
        coordinator.rejoin_needed = False
        await coordinator._on_join_prepare(0)
        assert listener.calls == []  # nothing revoked before joining
        await coordinator._on_join_complete(_Joined(Generation(5, "m-1", "cooperative-sticky"),
                                                    Assignment((tp(1), tp(2)))))
        assert listener.calls == [("revoked", [0]), ("assigned", [2])]
        assert subscriptions.assigned_partitions() == {tp(1), tp(2)}
        assert subscriptions.state(tp(1)) is kept and kept.position == 42  # kept partitions keep their position
        assert coordinator.rejoin_needed  # rejoin so the revoked partition can move

    asyncio.run(scenario())


def test_eager_join_revokes_everything_first_and_lost_membership_reports_lost() -> None:
    from kafkalite.client.consumer.assignors import RangeAssignor

    async def scenario() -> None:
        coordinator, subscriptions, listener = classic([RangeAssignor()])
        subscriptions.set_assignment([tp(0), tp(1)])
        coordinator.generation = Generation(4, "m-1", "range")
        coordinator.state = MemberState.STABLE
        await coordinator._on_join_prepare(0)
        assert listener.calls == [("revoked", [0, 1])] and not subscriptions.assigned_partitions()
        await coordinator._on_join_complete(_Joined(Generation(5, "m-1", "range"), Assignment((tp(1), tp(3)))))
        assert listener.calls[-1] == ("assigned", [1, 3])
        coordinator.reset_generation("heartbeat got UNKNOWN_MEMBER_ID")
        await coordinator._on_join_prepare(0)
        assert listener.calls[-1] == ("lost", [1, 3])

    asyncio.run(scenario())
