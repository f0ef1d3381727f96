"""The click application: the root command group, ``check``, and how failures are reported.

A usage mistake is click's usage line and exit status 2; a failure of the cluster or of the
connection (a Kafka error, a refused connection, a timeout, a bad client config) is one line,
``Error: ...``, on stderr and exit status 1. No traceback reaches the user: anything else that
escapes a command (a bug) is reported in one line too.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from kafkalite import __version__
from kafkalite.cli.common import EXPECTED_ERRORS, ClientSettings, client_options, json_option, one_line, run_async
from kafkalite.cli.consume import consume
from kafkalite.cli.faults import faults
from kafkalite.cli.groups import groups
from kafkalite.cli.output import render_json
from kafkalite.cli.produce import produce
from kafkalite.cli.topics import topics
from kafkalite.client.admin import Admin

__all__ = ["cli", "run"]


class _Commands(click.Group):
    """The root group: hidden aliases, and expected failures as one ``Error:`` line with exit status 1."""

    aliases = {"ping": "check"}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EXPECTED_ERRORS as exc:
            raise click.ClickException(one_line(exc)) from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kafkalite")
def cli() -> None:
    """kafkalite: a single-node broker that speaks the Kafka protocol, and tools for any Kafka cluster.

    `kafkalite serve` (the default command) runs the broker; the other commands talk to a cluster
    at --bootstrap-server (default localhost:9092, or KAFKALITE_BOOTSTRAP_SERVER), as kafka-topics,
    kafka-console-producer, kafka-consumer-groups and kcat do; `kafkalite faults` talks to a
    kafkalite broker's admin endpoint. Every command has --help.
    """


@cli.command("serve", short_help="Run the broker (the default command).", add_help_option=False,
             context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def serve_command(arguments: tuple[str, ...]) -> None:
    """Run the broker (the default command; `kafkalite serve --help` lists its flags)."""
    from kafkalite.cli.serve import main

    sys.exit(main(["serve", *arguments]))


@cli.command("check")
@client_options(timeout_s=3.0)
@json_option
def check_command(settings: ClientSettings, as_json: bool) -> None:
    """Ask the cluster for its API versions and metadata (alias: ping).

    Exit status 0 and one line (the cluster id and its brokers) when it answers, 1 when it does not:
    a container healthcheck can run `kafkalite check`.
    """
    async def ask() -> Any:
        async with Admin(settings.admin_config()) as admin:
            return await admin.describe_cluster()

    cluster = run_async(ask())
    brokers = sorted(cluster.brokers, key=lambda broker: broker.node_id)
    if as_json:
        click.echo(render_json({"cluster_id": cluster.cluster_id, "controller_id": cluster.controller_id,
                                "brokers": [{"node_id": broker.node_id, "host": broker.host, "port": broker.port,
                                             "rack": broker.rack} for broker in brokers]}))
        return
    listed = ", ".join(f"{broker.node_id} at {broker.host}:{broker.port}" for broker in brokers)
    noun = "broker" if len(brokers) == 1 else "brokers"
    click.echo(f"cluster {cluster.cluster_id} answered: {len(brokers)} {noun} ({listed}), "
               f"controller {cluster.controller_id}")


cli.add_command(topics)
cli.add_command(produce)
cli.add_command(consume)
cli.add_command(groups)
cli.add_command(faults)


def run(arguments: Sequence[str]) -> int:
    """``kafkalite ARGUMENTS`` for every command but ``serve``; click exits with the command's status."""
    try:
        cli.main(list(arguments), prog_name="kafkalite")
    except Exception as exc:  # noqa: BLE001 - a bug, still reported as one line
        click.echo(f"Error: unexpected {type(exc).__name__}: {one_line(exc)}", err=True)
        return 1
    return 0
