"""``kafkalite faults list|inject|clear``: fault injection through a broker's admin HTTP API.

The broker must serve its admin endpoint (``admin.listener``); ``--admin`` says where it is (default
``http://127.0.0.1:9644``, or ``KAFKALITE_ADMIN_URL``). ``inject`` takes the fields of ``POST
/v1/faults`` as options and prints the fault as the broker accepted it; a fault the broker refuses
is one ``Error:`` line with its reason and exit status 1, as is an endpoint that does not answer.
Nothing here imports the broker or the Kafka client: the commands speak HTTP and JSON (urllib).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import click

from kafkalite.cli.common import json_option
from kafkalite.cli.output import render_json, render_table

__all__ = ["faults"]

DEFAULT_ADMIN_URL = "http://127.0.0.1:9644"
TIMEOUT_S = 10.0
_F = TypeVar("_F", bound=Callable[..., Any])


def admin_option(function: _F) -> _F:
    return click.option("--admin", "admin_url", envvar="KAFKALITE_ADMIN_URL", default=DEFAULT_ADMIN_URL,
                        show_default=True, metavar="URL",
                        help="The broker's admin endpoint (admin.listener), also KAFKALITE_ADMIN_URL.")(function)


def _base(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if "://" in url else f"http://{url}"


def call(admin_url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One request to the admin API; its JSON answer (None for an empty one)."""
    base = _base(admin_url)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            text = response.read()
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            reason = exc.reason
        raise click.ClickException(f"{reason} (HTTP {exc.code})") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise click.ClickException(f"cannot reach the admin endpoint at {base}: {reason} (is admin.listener "
                                   "set on the broker?)") from None
    return json.loads(text) if text else None


def _target(fault: dict[str, Any]) -> str:
    parts = []
    if fault["topic"] is not None:
        parts.append(fault["topic"] + ("" if fault["partition"] is None else f"-{fault['partition']}"))
    if fault["client_id"] is not None:
        parts.append(f"client {fault['client_id']}")
    return ", ".join(parts) or "all"


def _what(fault: dict[str, Any]) -> str:
    if fault["error"] is not None:
        return str(fault["error"])
    if fault["delay_ms"]:
        return f"{fault['delay_ms']} ms"
    return ""


def fault_rows(listed: list[dict[str, Any]]) -> list[list[Any]]:
    return [[fault["id"], fault["kind"], fault["api"] or "*", _what(fault) or None, _target(fault),
             "every" if fault["remaining"] is None else fault["remaining"], fault["applied"],
             f"{fault['expires_in_ms'] / 1000:.1f}s"] for fault in listed]


def print_faults(listed: list[dict[str, Any]]) -> None:
    if not listed:
        click.echo("no faults in force")
        return
    click.echo(render_table(["ID", "KIND", "API", "WHAT", "TARGET", "REMAINING", "APPLIED", "EXPIRES IN"],
                            fault_rows(listed)))


@click.group()
def faults() -> None:
    """Inject faults into a broker's request path (its admin endpoint: admin.listener)."""


@faults.command("list")
@admin_option
@json_option
def list_command(admin_url: str, as_json: bool) -> None:
    """The faults in force, with what is left of each."""
    listed = call(admin_url, "GET", "/v1/faults")
    click.echo(render_json(listed)) if as_json else print_faults(listed)


KINDS = ("error", "disk_full", "latency", "stall", "drop_before", "drop_after", "leader_unavailable")


@faults.command("inject")
@admin_option
@click.option("--api", help="API name (Produce, Fetch, JoinGroup, ...) or key.")
@click.option("--error", help="Kafka error name or code, e.g. NOT_LEADER_OR_FOLLOWER (kind error).")
@click.option("--kind", type=click.Choice(KINDS), help="What to do (default: error when --error is given).")
@click.option("--count", type=int, help="Take the next N matching requests (default: every one).")
@click.option("--probability", type=float, help="Take each matching request with this probability.")
@click.option("--seed", type=int, help="Seed of the probability draws.")
@click.option("--delay-ms", type=int, help="latency: wait before handling; stall: hold the answer.")
@click.option("--duration-ms", type=int, help="Expire after this long (default 60000).")
@click.option("--topic", help="Only requests naming this topic (partitioned APIs, Metadata).")
@click.option("--partition", type=int, help="Only this partition of --topic.")
@click.option("--client-id", help="Only requests from this client id.")
@json_option
def inject_command(admin_url: str, as_json: bool, **options: Any) -> None:
    """Inject a fault; it expires by itself (--duration-ms, 60 s unless said).

    \b
    kafkalite faults inject --api Produce --error NOT_LEADER_OR_FOLLOWER --count 3
    kafkalite faults inject --kind latency --api Fetch --delay-ms 500 --duration-ms 10000
    kafkalite faults inject --kind leader_unavailable --topic orders --partition 0 --duration-ms 5000
    """
    body = {key: value for key, value in options.items() if value is not None}
    fault = call(admin_url, "POST", "/v1/faults", body)
    if as_json:
        click.echo(render_json(fault))
        return
    click.echo(f"injected fault {fault['id']}:")
    print_faults([fault])


@faults.command("clear")
@admin_option
@click.argument("fault_ids", nargs=-1, type=int)
def clear_command(admin_url: str, fault_ids: tuple[int, ...]) -> None:
    """Remove the faults with these ids, or every fault when none is given."""
    if not fault_ids:
        cleared = call(admin_url, "DELETE", "/v1/faults")["cleared"]
        click.echo(f"cleared {cleared} fault{'' if cleared == 1 else 's'}")
        return
    for fault_id in fault_ids:
        call(admin_url, "DELETE", f"/v1/faults/{fault_id}")
        click.echo(f"removed fault {fault_id}")
