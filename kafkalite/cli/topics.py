"""``kafkalite topics list|create|describe|alter|delete``: kafka-topics, on the bundled admin client.

``describe`` shows each partition's leader, replicas and in-sync replicas and the topic's configs
that are not defaults (as kafka-topics does: a config set on the topic, or on the brokers); ``alter``
changes configs (IncrementalAlterConfigs) and raises the partition count (CreatePartitions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from kafkalite.cli.common import ClientSettings, client_options, json_option, pair_options, run_async
from kafkalite.cli.output import kafka_uuid, render_json, render_table
from kafkalite.client.admin import Admin
from kafkalite.client.admin_types import ConfigEntry, ConfigResource, NewTopic, TopicDescription
from kafkalite.client.errors import UnsupportedVersionError
from kafkalite.protocol.errors import ErrorCode

__all__ = ["non_default_configs", "topics"]

_DEFAULT_CONFIG_SOURCE = 5  # DescribeConfigs' DEFAULT_CONFIG


def non_default_configs(entries: Mapping[str, ConfigEntry]) -> dict[str, str | None]:
    """The configs kafka-topics prints: those not at their default (v0 answers say so with ``is_default``)."""
    return {name: None if entry.is_sensitive else entry.value for name, entry in sorted(entries.items())
            if not (entry.is_default or entry.source == _DEFAULT_CONFIG_SOURCE)}


@click.group("topics", short_help="List, create, describe, alter and delete topics.")
def topics() -> None:
    """List, create, describe, alter and delete topics (as kafka-topics does)."""


@topics.command("list", short_help="Every topic with its partition count.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics such as __consumer_offsets.")
@client_options()
@json_option
def list_topics(settings: ClientSettings, exclude_internal: bool, as_json: bool) -> None:
    """Every topic with its partition count and replication factor."""
    async def ask() -> dict[str, TopicDescription]:
        async with Admin(settings.admin_config()) as admin:
            return await admin.describe_topics(include_internal=not exclude_internal)

    described = run_async(ask())
    if as_json:
        click.echo(render_json([{"topic": name, "partitions": len(topic.partitions),
                                 "replication_factor": topic.replication_factor, "internal": topic.is_internal}
                                for name, topic in described.items()]))
        return
    click.echo(render_table(["TOPIC", "PARTITIONS", "REPLICATION-FACTOR"],
                            [(name, len(topic.partitions), topic.replication_factor)
                             for name, topic in described.items()]))


@topics.command("create")
@click.option("--topic", "-t", "names", required=True, multiple=True, metavar="TOPIC",
              help="The topic to create. Repeatable.")
@click.option("--partitions", type=click.IntRange(min=1), metavar="N", help="Partition count (default: the broker's).")
@click.option("--replication-factor", type=click.IntRange(min=1), metavar="N", help="Replicas per partition "
              "(default: the broker's).")
@click.option("--config", "configs", multiple=True, callback=pair_options, metavar="KEY=VALUE",
              help="A topic config such as retention.ms=60000. Repeatable.")
@click.option("--if-not-exists", is_flag=True, help="Succeed quietly when the topic exists.")
@client_options()
def create_topic(settings: ClientSettings, names: Sequence[str], partitions: int | None,
                 replication_factor: int | None, configs: dict[str, str], if_not_exists: bool) -> None:
    """Create topics."""
    async def create() -> dict[str, Any]:
        async with Admin(settings.admin_config()) as admin:
            return await admin.create_topics([NewTopic(name, partitions or -1, replication_factor or -1, configs)
                                              for name in dict.fromkeys(names)])

    failures = []
    for name, result in run_async(create()).items():
        if result.error is None:
            click.echo(f"Created topic {name}.")
        elif not (if_not_exists and result.error.error_code is ErrorCode.TOPIC_ALREADY_EXISTS):
            failures.append(str(result.error))
    if failures:
        raise click.ClickException("; ".join(failures))


@topics.command("describe", short_help="Partitions, leaders, replicas, ISR and configs.")
@click.option("--topic", "-t", "names", multiple=True, metavar="TOPIC",
              help="The topic to describe (default: every topic). Repeatable.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (when no --topic is given).")
@client_options()
@json_option
def describe_topics(settings: ClientSettings, names: Sequence[str], exclude_internal: bool, as_json: bool) -> None:
    """Partitions with their leader, replicas and in-sync replicas, and the topic's non-default configs."""
    async def ask() -> tuple[dict[str, TopicDescription], dict[str, dict[str, str | None]] | None]:
        async with Admin(settings.admin_config()) as admin:
            described = await admin.describe_topics(names or None, include_internal=not exclude_internal)
            for topic in described.values():
                topic.raise_for_error()
            try:
                configs = await admin.describe_configs([ConfigResource.topic(name) for name in described])
            except UnsupportedVersionError:  # a cluster without DescribeConfigs: the partitions alone
                return described, None
            return described, {resource.name: non_default_configs(result.entries)
                               for resource, result in configs.items() if result.error is None}

    described, configs = run_async(ask())
    if as_json:
        click.echo(render_json([_topic_document(topic, None if configs is None else configs.get(name))
                                for name, topic in described.items()]))
        return
    blocks = []
    for name, topic in described.items():
        header = (f"Topic: {name}  TopicId: {kafka_uuid(topic.topic_id) or '-'}  "
                  f"PartitionCount: {len(topic.partitions)}  ReplicationFactor: {topic.replication_factor}")
        if configs is None:
            shown = "(the cluster does not answer DescribeConfigs)"
        else:
            shown = ", ".join(f"{key}={'[hidden]' if value is None else value}"
                              for key, value in configs.get(name, {}).items()) or "(defaults)"
        offline = any(partition.offline_replicas for partition in topic.partitions)
        headers = ["PARTITION", "LEADER", "REPLICAS", "ISR", *(["OFFLINE"] if offline else [])]
        rows = [(partition.partition, partition.leader if partition.leader >= 0 else "none", partition.replicas,
                 partition.isr, *([partition.offline_replicas] if offline else []))
                for partition in topic.partitions]
        blocks.append(f"{header}\nConfigs: {shown}\n{render_table(headers, rows, indent='  ')}")
    click.echo("\n\n".join(blocks))


def _topic_document(topic: TopicDescription, configs: dict[str, str | None] | None) -> dict[str, Any]:
    return {"topic": topic.name, "topic_id": kafka_uuid(topic.topic_id), "internal": topic.is_internal,
            "partition_count": len(topic.partitions), "replication_factor": topic.replication_factor,
            "configs": configs,
            "partitions": [{"partition": partition.partition, "leader": partition.leader,
                            "leader_epoch": partition.leader_epoch, "replicas": list(partition.replicas),
                            "isr": list(partition.isr), "offline_replicas": list(partition.offline_replicas)}
                           for partition in topic.partitions]}


@topics.command("alter", short_help="Change configs, add partitions.")
@click.option("--topic", "-t", "name", required=True, metavar="TOPIC", help="The topic to change.")
@click.option("--partitions", type=click.IntRange(min=1), metavar="N",
              help="The new partition count (it can only grow).")
@click.option("--config", "configs", multiple=True, callback=pair_options, metavar="KEY=VALUE",
              help="Set a topic config. Repeatable.")
@click.option("--delete-config", "deleted", multiple=True, metavar="KEY",
              help="Return a topic config to its default. Repeatable.")
@client_options()
def alter_topic(settings: ClientSettings, name: str, partitions: int | None, configs: dict[str, str],
                deleted: Sequence[str]) -> None:
    """Change a topic's configs and raise its partition count."""
    if partitions is None and not configs and not deleted:
        raise click.UsageError("nothing to change: give --partitions, --config or --delete-config")

    async def alter() -> list[str]:
        done = []
        async with Admin(settings.admin_config()) as admin:
            if configs or deleted:
                changes: dict[str, str | None] = {**configs, **dict.fromkeys(deleted)}
                resource = ConfigResource.topic(name)
                (await admin.incremental_alter_configs({resource: changes}))[resource].raise_for_error()
                done += [f"set {key}={value}" for key, value in configs.items()]
                done += [f"deleted {key}" for key in deleted]
            if partitions is not None:
                (await admin.create_partitions({name: partitions}))[name].raise_for_error()
                done.append(f"partition count {partitions}")
        return done

    click.echo(f"Altered topic {name}: {'; '.join(run_async(alter()))}.")


@topics.command("delete")
@click.option("--topic", "-t", "names", required=True, multiple=True, metavar="TOPIC",
              help="The topic to delete. Repeatable.")
@click.option("--if-exists", is_flag=True, help="Succeed quietly when the topic does not exist.")
@client_options()
def delete_topic(settings: ClientSettings, names: Sequence[str], if_exists: bool) -> None:
    """Delete topics and their records."""
    async def delete() -> dict[str, Any]:
        async with Admin(settings.admin_config()) as admin:
            return await admin.delete_topics(list(dict.fromkeys(names)))

    failures = []
    for name, result in run_async(delete()).items():
        if result.error is None:
            click.echo(f"Deleted topic {name}.")
        elif not (if_exists and result.error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            failures.append(str(result.error))
    if failures:
        raise click.ClickException("; ".join(failures))
