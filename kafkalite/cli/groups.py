"""``kafkalite groups list|describe|reset-offsets|delete``: kafka-consumer-groups on the bundled admin client.

``describe`` prints, per partition the group has a committed offset for or a member is assigned,
the committed offset, the log end offset, the lag and the member, as kafka-consumer-groups does;
members without partitions get a row of their own. ``reset-offsets`` prints its plan and changes
nothing unless ``--execute`` is given, and then only for a group without members (the broker would
refuse a commit from outside an active generation anyway; saying so first is clearer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from kafkalite.cli.common import ClientSettings, client_options, json_option, run_async
from kafkalite.cli.output import render_json, render_table
from kafkalite.cli.parsing import parse_datetime_ms, parse_topic_partitions
from kafkalite.cli.reset import PartitionOffsets, ResetKind, ResetStrategy, plan
from kafkalite.client.admin import Admin
from kafkalite.client.admin_types import GroupDescription, MemberDescription, OffsetSpec
from kafkalite.client.metadata import TopicPartition
from kafkalite.protocol.errors import ErrorCode

__all__ = ["GroupReport", "describe_group", "groups", "offset_rows"]

_INACTIVE = ("Empty", "Dead")
_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


@dataclass(frozen=True, slots=True)
class GroupReport:
    """A group's description with its committed offsets and the log end offsets of those partitions."""

    description: GroupDescription
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    log_end: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def exists(self) -> bool:
        return self.description.state != "Dead" or bool(self.committed)


async def describe_group(admin: Admin, group_id: str) -> GroupReport:
    description = (await admin.describe_groups([group_id]))[group_id]
    if description.error is not None:
        if description.error.error_code is not ErrorCode.GROUP_ID_NOT_FOUND:
            raise description.error
        description = GroupDescription(group_id, None, "Dead")
    committed = {partition: offset.offset
                 for partition, offset in (await admin.list_consumer_group_offsets(group_id)).items()}
    partitions = sorted(set(committed) | {partition for member in description.members
                                          for partition in member.assignment})
    log_end = {}
    if partitions:
        answers = await admin.list_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        log_end = {partition: answer.offset for partition, answer in answers.items() if answer.error is None}
    return GroupReport(description, committed, log_end)


def offset_rows(report: GroupReport) -> list[dict[str, Any]]:
    """kafka-consumer-groups' rows: one per partition (committed or assigned), one per member without any."""
    owners: dict[TopicPartition, MemberDescription] = {
        partition: member for member in report.description.members for partition in member.assignment}
    rows = []
    for partition in sorted(set(report.committed) | set(owners)):
        member = owners.get(partition)
        current = report.committed.get(partition)
        end = report.log_end.get(partition)
        rows.append({"topic": partition.topic, "partition": partition.partition, "current_offset": current,
                     "log_end_offset": end, "lag": None if current is None or end is None else max(0, end - current),
                     "member_id": member.member_id if member else None,
                     "host": member.client_host if member else None, "client_id": member.client_id if member else None})
    for member in report.description.members:
        if not member.assignment:
            rows.append({"topic": None, "partition": None, "current_offset": None, "log_end_offset": None,
                         "lag": None, "member_id": member.member_id, "host": member.client_host,
                         "client_id": member.client_id})
    return rows


def _assignment_text(assignment: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for partition in sorted(assignment):
        by_topic.setdefault(partition.topic, []).append(partition.partition)
    return ",".join(f"{topic}({','.join(map(str, indexes))})" for topic, indexes in by_topic.items()) or "-"


def _group_document(report: GroupReport) -> dict[str, Any]:
    description = report.description
    return {"group": description.group_id, "state": description.state, "protocol_type": description.protocol_type,
            "protocol": description.protocol,
            "members": [{"member_id": member.member_id, "group_instance_id": member.group_instance_id,
                         "client_id": member.client_id, "host": member.client_host,
                         "assignment": [{"topic": item.topic, "partition": item.partition}
                                        for item in sorted(member.assignment)]}
                        for member in description.members],
            "offsets": offset_rows(report)}


@click.group("groups", short_help="List, describe, reset-offsets and delete consumer groups.")
def groups() -> None:
    """List, describe, reset the offsets of and delete consumer groups (as kafka-consumer-groups does)."""


@groups.command("list", short_help="Every group with its type and state.")
@click.option("--state", "states", multiple=True, help="Only groups in this state (Stable, Empty, ...). Repeatable.")
@client_options()
@json_option
def list_groups(settings: ClientSettings, states: Sequence[str], as_json: bool) -> None:
    """Every group of the cluster with its type, protocol type and state."""
    async def ask() -> list[Any]:
        async with Admin(settings.admin_config()) as admin:
            return await admin.list_groups(states=list(states) or None)

    listings = run_async(ask())
    if as_json:
        click.echo(render_json([{"group": listing.group_id, "type": listing.type or None,
                                 "protocol_type": listing.protocol_type, "state": listing.state or None}
                                for listing in listings]))
        return
    click.echo(render_table(["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"],
                            [(listing.group_id, listing.type or None, listing.protocol_type or None,
                              listing.state or None) for listing in listings]))


@groups.command("describe", short_help="Offsets, lag and members of groups.")
@click.option("--group", "-g", "group_ids", multiple=True, metavar="GROUP", help="The group to describe. Repeatable.")
@click.option("--all-groups", is_flag=True, help="Describe every group.")
@click.option("--members", is_flag=True, help="List the members and their assignments instead of the offsets.")
@client_options()
@json_option
def describe_groups(settings: ClientSettings, group_ids: Sequence[str], all_groups: bool, members: bool,
                    as_json: bool) -> None:
    """Members, assignments, committed offsets, log end offsets and lag per partition."""
    if not group_ids and not all_groups:
        raise click.UsageError("give --group GROUP (repeatable) or --all-groups")

    async def ask() -> list[GroupReport]:
        async with Admin(settings.admin_config()) as admin:
            wanted = list(dict.fromkeys(group_ids))
            if all_groups:
                wanted += [listing.group_id for listing in await admin.list_groups() if listing.group_id not in wanted]
            return [await describe_group(admin, group_id) for group_id in wanted]

    reports = run_async(ask())
    missing = [report.description.group_id for report in reports if not report.exists]
    if missing:
        raise click.ClickException(f"consumer group {missing[0]!r} does not exist")
    if as_json:
        click.echo(render_json([_group_document(report) for report in reports]))
        return
    blocks = []
    for report in reports:
        description = report.description
        lines = []
        if description.state == "Empty" or (description.state == "Dead" and report.committed):
            lines.append(f"Consumer group '{description.group_id}' has no active members.")
        elif description.state in _REBALANCING:
            lines.append(f"Consumer group '{description.group_id}' is rebalancing.")
        if members:
            lines.append(render_table(
                ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                [(description.group_id, member.member_id, member.client_host, member.client_id,
                  len(member.assignment), _assignment_text(member.assignment)) for member in description.members]))
        else:
            lines.append(render_table(
                ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID"],
                [(description.group_id, row["topic"], row["partition"], row["current_offset"], row["log_end_offset"],
                  row["lag"], row["member_id"], row["host"], row["client_id"]) for row in offset_rows(report)]))
        blocks.append("\n".join(lines))
    click.echo("\n\n".join(blocks))


def _topic_specs(context: click.Context, parameter: click.Parameter,
                 values: Sequence[str]) -> list[tuple[str, tuple[int, ...] | None]]:
    specs = []
    for value in values:
        try:
            specs.append(parse_topic_partitions(value))
        except ValueError as exc:
            raise click.BadParameter(str(exc), context, parameter) from None
    return specs


def _strategy(to_earliest: bool, to_latest: bool, to_offset: int | None, to_datetime: str | None,
              shift_by: int | None) -> ResetStrategy:
    chosen = [name for name, given in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                                       ("--to-offset", to_offset is not None),
                                       ("--to-datetime", to_datetime is not None),
                                       ("--shift-by", shift_by is not None)) if given]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                               f"--shift-by{' (got ' + ', '.join(chosen) + ')' if chosen else ''}")
    if to_earliest:
        return ResetStrategy(ResetKind.EARLIEST)
    if to_latest:
        return ResetStrategy(ResetKind.LATEST)
    if to_offset is not None:
        return ResetStrategy(ResetKind.OFFSET, to_offset)
    if to_datetime is not None:
        try:
            return ResetStrategy(ResetKind.DATETIME, parse_datetime_ms(to_datetime))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--to-datetime'") from None
    assert shift_by is not None
    return ResetStrategy(ResetKind.SHIFT, shift_by)


@groups.command("reset-offsets", short_help="Move a group's committed offsets (dry run by default).")
@click.option("--group", "-g", "group_id", required=True, metavar="GROUP", help="The group whose offsets move.")
@click.option("--topic", "-t", "topic_specs", multiple=True, callback=_topic_specs, metavar="TOPIC[:P,P...]",
              help="A topic, or some of its partitions (orders:0,2). Repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset.")
@click.option("--to-offset", type=int, metavar="OFFSET", help="To this offset (kept within the log).")
@click.option("--to-datetime", metavar="ISO-8601", help="To the first record at or after this time, such as "
              "2024-05-01T12:00:00.000 (local time) or 2024-05-01T10:00:00Z.")
@click.option("--shift-by", type=int, metavar="N", help="By N from the committed offset (negative: back).")
@click.option("--execute", is_flag=True, help="Apply the plan (the group must have no members).")
@click.option("--dry-run", is_flag=True, help="Only print the plan (what happens without --execute).")
@client_options()
@json_option
def reset_offsets(settings: ClientSettings, group_id: str, topic_specs: list[tuple[str, tuple[int, ...] | None]],
                  all_topics: bool, to_earliest: bool, to_latest: bool, to_offset: int | None,
                  to_datetime: str | None, shift_by: int | None, execute: bool, dry_run: bool, as_json: bool) -> None:
    """Move a group's committed offsets; prints the plan, and applies it with --execute."""
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    if bool(topic_specs) == all_topics:
        raise click.UsageError("give --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics")
    strategy = _strategy(to_earliest, to_latest, to_offset, to_datetime, shift_by)

    async def reset() -> tuple[str, dict[TopicPartition, int | None], dict[TopicPartition, int]]:
        async with Admin(settings.admin_config()) as admin:
            description = (await admin.describe_groups([group_id]))[group_id]
            state = "Dead" if description.error is not None else description.state
            if execute and state not in _INACTIVE:
                raise click.ClickException(f"offsets can only be reset while group '{group_id}' has no members, "
                                           f"but its state is {state}")
            committed = {partition: offset.offset
                         for partition, offset in (await admin.list_consumer_group_offsets(group_id)).items()}
            partitions = sorted(committed) if all_topics else await _partitions(admin, topic_specs)
            offsets = await _partition_offsets(admin, partitions, committed, strategy)
            try:
                new_offsets = plan(strategy, offsets)
            except ValueError as exc:
                raise click.ClickException(str(exc)) from None
            if execute and new_offsets:
                results = await admin.alter_consumer_group_offsets(group_id, new_offsets)
                for result in results.values():
                    result.raise_for_error()
            return state, {partition: committed.get(partition) for partition in partitions}, new_offsets

    state, current, new_offsets = run_async(reset())
    if as_json:
        click.echo(render_json({"group": group_id, "executed": execute, "offsets": [
            {"topic": partition.topic, "partition": partition.partition, "current_offset": current[partition],
             "new_offset": offset} for partition, offset in new_offsets.items()]}))
    else:
        click.echo(render_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                                [(group_id, partition.topic, partition.partition, current[partition], offset)
                                 for partition, offset in new_offsets.items()]))
    if execute:
        click.echo(f"Offsets of group '{group_id}' were reset.", err=True)
    else:
        note = "" if state in _INACTIVE else f" (the group is {state}: --execute needs it without members)"
        click.echo(f"Dry run: nothing changed; add --execute to apply{note}.", err=True)


async def _partitions(admin: Admin, specs: Sequence[tuple[str, tuple[int, ...] | None]]) -> list[TopicPartition]:
    described = await admin.describe_topics(list(dict.fromkeys(topic for topic, _ in specs)))
    partitions: set[TopicPartition] = set()
    for topic, indexes in specs:
        description = described[topic]
        description.raise_for_error()
        count = len(description.partitions)
        for index in range(count) if indexes is None else indexes:
            if index >= count:
                raise click.ClickException(f"topic {topic!r} has no partition {index} (it has {count})")
            partitions.add(TopicPartition(topic, index))
    return sorted(partitions)


async def _partition_offsets(admin: Admin, partitions: Sequence[TopicPartition], committed: dict[TopicPartition, int],
                             strategy: ResetStrategy) -> dict[TopicPartition, PartitionOffsets]:
    if not partitions:
        return {}
    earliest = await admin.list_offsets(dict.fromkeys(partitions, OffsetSpec.EARLIEST))
    latest = await admin.list_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
    by_time = {}
    if strategy.kind is ResetKind.DATETIME:
        by_time = await admin.list_offsets(dict.fromkeys(partitions, strategy.value))
    offsets = {}
    for partition in partitions:
        for answers in (earliest, latest, by_time):
            if partition in answers:
                answers[partition].raise_for_error()
        offsets[partition] = PartitionOffsets(earliest[partition].offset, latest[partition].offset,
                                              committed.get(partition),
                                              by_time[partition].offset if partition in by_time else None)
    return offsets


@groups.command("delete", short_help="Delete groups without members.")
@click.option("--group", "-g", "group_ids", required=True, multiple=True, metavar="GROUP",
              help="The group to delete. Repeatable.")
@client_options()
def delete_groups(settings: ClientSettings, group_ids: Sequence[str]) -> None:
    """Delete groups without members, with their committed offsets."""
    async def delete() -> dict[str, Any]:
        async with Admin(settings.admin_config()) as admin:
            return await admin.delete_groups(list(dict.fromkeys(group_ids)))

    failures = []
    for group_id, result in run_async(delete()).items():
        if result.error is None:
            click.echo(f"Deleted group {group_id}.")
        else:
            failures.append(str(result.error))
    if failures:
        raise click.ClickException("; ".join(failures))
