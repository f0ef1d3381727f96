"""``kafkalite certs``: a development CA, a broker certificate and client certificates, as PEM files.

::

    kafkalite certs --out ./certs --host localhost --client alice --client bob

writes into ``--out``:

==========================  ===========================================================================
``ca.pem``, ``ca-key.pem``  the CA's certificate (what clients and the broker trust) and private key
``broker.pem``              the broker's private key followed by its certificate chain: the
                            ``ssl.keystore.location`` of a PEM key store
``broker-cert.pem``,        the same certificate and key apart
``broker-key.pem``
``<client>.pem``,           each client's certificate (subject ``CN=<client>``) and private key, for
``<client>-key.pem``        ``ssl.client.auth``
==========================  ===========================================================================

and prints the broker settings that use them. ``--key-password`` encrypts the broker's key (then
``ssl.key.password``). The keys are EC P-256, the certificates valid for ``--days`` (default 825).
Development only: the CA key sits next to the certificates. Needs ``cryptography`` (the ``security``
extra); ``make_certificates`` (``kafkalite.cli.dev_certificates``) is the same for tests.
"""

from __future__ import annotations

import click

from kafkalite.cli.dev_certificates import DevCertificates, make_certificates

__all__ = ["DevCertificates", "certs", "make_certificates"]


@click.command("certs")
@click.option("--out", "out", type=click.Path(file_okay=False), default="certs", show_default=True,
              help="Directory to write the PEM files into.")
@click.option("--host", "hosts", multiple=True, help="A host name or address the broker certificate is for "
              "(repeatable; default localhost, 127.0.0.1 and ::1).")
@click.option("--client", "clients", multiple=True, help="Make a client certificate with CN=NAME (repeatable).")
@click.option("--days", type=click.IntRange(1), default=825, show_default=True, help="How long the certificates last.")
@click.option("--key-password", default=None, help="Encrypt the broker's private key with this password.")
def certs(out: str, hosts: tuple[str, ...], clients: tuple[str, ...], days: int, key_password: str | None) -> None:
    """Make a development CA, a broker certificate and client certificates (PEM) for TLS listeners."""
    try:
        written = make_certificates(out, hosts or ("localhost", "127.0.0.1", "::1"), clients, days=days,
                                    key_password=key_password)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {written.ca}, {written.broker} and {len(written.clients)} client certificate(s)")
    click.echo("broker settings (server.properties):")
    click.echo("  listeners=PLAINTEXT://localhost:9092,SSL://localhost:9093")
    for key, value in written.broker_settings(key_password).items():
        click.echo(f"  {key}={value}")
    if clients:
        click.echo("  ssl.client.auth=required")
    click.echo("client settings: security.protocol=SSL, ssl.ca.location (librdkafka) or ssl_cafile (kafka-python) "
               f"= {written.ca}")
