"""``kafkalite scram``: SCRAM users of a cluster, as ``kafka-configs --entity-type users`` manages them.

::

    kafkalite scram set alice --password alice-secret [--mechanism SCRAM-SHA-512] [--iterations 8192]
    kafkalite scram describe [alice ...]
    kafkalite scram delete alice [--mechanism SCRAM-SHA-256]

``set`` salts the password on this side and sends the salted password (AlterUserScramCredentials);
the broker keeps only what RFC 5802 asks for. ``-X`` passes client configs (``security.protocol``,
``sasl.mechanism``...) for a secured listener.
"""

from __future__ import annotations

from typing import Any

import click

from kafkalite.cli.common import ClientSettings, client_options, json_option, run_async
from kafkalite.cli.output import render_json, render_table
from kafkalite.client.admin import Admin

__all__ = ["scram"]

_MECHANISMS = click.Choice(["SCRAM-SHA-256", "SCRAM-SHA-512"], case_sensitive=False)


@click.group("scram")
def scram() -> None:
    """Create, list and delete users' SCRAM credentials (SCRAM-SHA-256/512)."""


def _raise_first(results: dict[str, Any]) -> None:
    for result in results.values():
        if result.error is not None:
            raise result.error


@scram.command("set")
@click.argument("user")
@click.option("--password", prompt=True, hide_input=True, help="The user's password (asked for when not given).")
@click.option("--mechanism", type=_MECHANISMS, default="SCRAM-SHA-256", show_default=True)
@click.option("--iterations", type=click.IntRange(4096, 16384), default=8192, show_default=True)
@client_options()
def set_command(settings: ClientSettings, user: str, password: str, mechanism: str, iterations: int) -> None:
    """Create or replace USER's credential for one mechanism."""
    async def call() -> Any:
        async with Admin(settings.admin_config()) as admin:
            return await admin.alter_user_scram_credentials(upsertions=[(user, mechanism.upper(), password,
                                                                         iterations)])

    _raise_first(run_async(call()))
    click.echo(f"set {mechanism.upper()} credential of {user} ({iterations} iterations)")


@scram.command("delete")
@click.argument("user")
@click.option("--mechanism", type=_MECHANISMS, default="SCRAM-SHA-256", show_default=True)
@client_options()
def delete_command(settings: ClientSettings, user: str, mechanism: str) -> None:
    """Delete USER's credential for one mechanism."""
    async def call() -> Any:
        async with Admin(settings.admin_config()) as admin:
            return await admin.alter_user_scram_credentials(deletions=[(user, mechanism.upper())])

    _raise_first(run_async(call()))
    click.echo(f"deleted {mechanism.upper()} credential of {user}")


@scram.command("describe")
@click.argument("users", nargs=-1)
@client_options()
@json_option
def describe_command(settings: ClientSettings, users: tuple[str, ...], as_json: bool) -> None:
    """List the SCRAM mechanisms and iteration counts of USERS (every user when none is named)."""
    async def call() -> Any:
        async with Admin(settings.admin_config()) as admin:
            return await admin.describe_user_scram_credentials(list(users) or None)

    described = run_async(call())
    for error, _ in described.values():
        if error is not None:
            raise error
    rows = [[user, mechanism, iterations] for user, (_, mechanisms) in sorted(described.items())
            for mechanism, iterations in sorted(mechanisms.items())]
    if as_json:
        click.echo(render_json([{"user": user, "mechanism": mechanism, "iterations": iterations}
                                for user, mechanism, iterations in rows]))
    else:
        click.echo(render_table(["USER", "MECHANISM", "ITERATIONS"], rows))
