"""The container files, read as Docker and Compose would read them (no Docker engine is needed).

The compose file must parse and describe the service users expect (Kafka's port, a named data volume,
a health check that really asks the broker), and the image's settings must make a valid broker
configuration: both listeners served, each advertised where its clients can reach it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from kafkalite.broker.config import BrokerConfig, Listener, read_properties

REPO = Path(__file__).resolve().parents[2]


def dockerfile() -> list[tuple[str, str]]:
    """The instructions of the Dockerfile: (INSTRUCTION, arguments), continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, arguments = line.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def image_environment() -> dict[str, str]:
    environment: dict[str, str] = {}
    for keyword, arguments in dockerfile():
        if keyword == "ENV":
            for pair in shlex.split(arguments):
                name, _, value = pair.partition("=")
                environment[name] = value
    return environment


def test_the_compose_file_describes_the_service() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    service = compose["services"]["kafkalite"]
    assert service["build"] == "."
    assert "9092:9092" in service["ports"]
    volume, _, mount = service["volumes"][0].partition(":")
    assert mount == "/data" and volume in compose["volumes"]
    assert service["healthcheck"]["test"][:3] == ["CMD", "kafkalite", "check"]
    assert set(service["environment"]) <= set(image_environment()) | {"KAFKALITE_ADVERTISED_LISTENERS"}


def test_the_image_runs_as_a_user_with_a_health_check() -> None:
    instructions = dockerfile()
    keywords = [keyword for keyword, _ in instructions]
    assert instructions[0][0] == "FROM" and instructions[0][1].startswith("python:") and "slim" in instructions[0][1]
    users = [arguments for keyword, arguments in instructions if keyword == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert "9092" in dict(instructions)["EXPOSE"].split()
    assert "HEALTHCHECK" in keywords and "kafkalite check" in dict(instructions)["HEALTHCHECK"].replace('", "', " ")
    assert '"/data"' in dict(instructions)["VOLUME"]


def test_the_images_settings_serve_the_host_and_the_compose_network() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    environment = {**image_environment(), **compose["services"]["kafkalite"]["environment"]}
    config = BrokerConfig.load(REPO / "config" / "server.properties", {}, environ=environment)
    assert config.listeners() == [Listener("PLAINTEXT", "0.0.0.0", 9092), Listener("INTERNAL", "0.0.0.0", 29092)]
    assert config.advertised_listeners() == [Listener("PLAINTEXT", "localhost", 9092),
                                            Listener("INTERNAL", "kafkalite", 29092)]
    assert config.data_dir() == Path("/data")
    assert read_properties(REPO / "config" / "server.properties")  # the file the image starts with


def test_the_health_check_is_a_real_command() -> None:
    from kafkalite.cli.app import cli

    healthcheck = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    command = healthcheck["services"]["kafkalite"]["healthcheck"]["test"]
    assert command[1] == "kafkalite" and command[2] in cli.commands
