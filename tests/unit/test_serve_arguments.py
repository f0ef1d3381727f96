"""``kafkalite serve``'s arguments: the plain forms read without argparse give what argparse gives."""

from __future__ import annotations

import argparse
import random

import pytest

from kafkalite.cli.serve import _parse_args, _parse_plain, _parser

PLAIN = [
    [],
    ["--port", "0"],
    ["--port=19092", "--memory"],
    ["--port", " 7 "],
    ["--port", "1_000"],
    ["--port=-5"],
    ["--listeners", "PLAINTEXT://127.0.0.1:9092", "--data-dir", "data", "num.partitions=3"],
    ["--advertised-listeners=PLAINTEXT://example:9092", "--config", "server.properties"],
    ["--log-level", "debug", "--log-format", "json"],
    ["--log-level=Warning", "--log-format=text"],
    ["--security", "SASL_SSL:SCRAM-SHA-256", "--port", "0"],
    ["--override", "a=b", "--override=c=d", "e=f", "g=h=i"],
    ["--memory", "--memory", "--port", "1", "--port", "2"],
    ["--config", "", "x="],
    ["log.retention.hours=5"],
    ["--data-dir", "a=b"],
]

NOT_PLAIN = [
    ["--help"], ["-h"], ["--data", "dir"], ["--port", "x"], ["--port", "+-5"], ["--port", "-5"],
    ["--log-level", "verbose"], ["--log-level="], ["--log-format", "xml"], ["--memory=yes"], ["--port"],
    ["--listeners", "--memory"], ["a=b", "--port", "5"], ["num.partitions"], [""], ["--"], ["-"],
    ["--unknown", "1"], ["serve"], ["a=b", "-x=1"], ["--override"],
]


def argparse_reading(argv: list[str]) -> dict[str, object] | None:
    """What argparse makes of ``serve ARGV`` (None: it refuses them)."""
    try:
        return vars(_parser().parse_args(["serve", *argv]))
    except SystemExit:
        return None


@pytest.mark.parametrize("argv", PLAIN)
def test_plain_arguments_read_as_argparse_reads_them(argv: list[str]) -> None:
    plain = _parse_plain(argv)
    assert plain is not None
    assert vars(plain) == argparse_reading(argv)


@pytest.mark.parametrize("argv", NOT_PLAIN)
def test_other_arguments_are_left_to_argparse(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _parse_plain(argv) is None
    argparse_reading(argv)  # whatever it says, it says it as before
    capsys.readouterr()


def test_random_arguments_read_alike_whenever_the_plain_reading_takes_them(
        capsys: pytest.CaptureFixture[str]) -> None:
    tokens = ["--port", "--port=3", "9", "-1", "--memory", "--listeners", "PLAINTEXT://h:1", "--data-dir",
              "d", "--log-level", "info", "--log-format", "json", "--override", "k=v", "x=y", "--security",
              "SSL", "--config", "c", "serve", "--", "-h", "=", "a=", "--data", "--log-level=bogus"]
    chooser = random.Random(16)
    taken = 0
    for _ in range(3000):
        argv = [chooser.choice(tokens) for _ in range(chooser.randint(0, 7))]
        plain = _parse_plain(argv)
        if plain is not None:
            taken += 1
            assert vars(plain) == argparse_reading(argv), argv
    capsys.readouterr()
    assert taken > 100


def test_the_serve_word_and_help_still_go_through_parse_args(capsys: pytest.CaptureFixture[str]) -> None:
    assert vars(_parse_args(["serve", "--port", "5"])) == vars(_parse_args(["--port", "5"]))
    with pytest.raises(SystemExit):
        _parse_args(["--help"])
    assert "run the broker (the default)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        _parse_args(["serve", "--help"])
    assert "--advertised-listeners" in capsys.readouterr().out
    assert isinstance(_parse_args(["--data", "d"]), argparse.Namespace)  # an abbreviation: argparse's


def test_every_option_of_the_parser_is_known_to_the_plain_reading() -> None:
    serve = next(action for action in _parser()._actions if isinstance(action, argparse._SubParsersAction))
    options = {option for action in serve.choices["serve"]._actions for option in action.option_strings}
    assert options - {"-h", "--help"} == {"--config", "--port", "--listeners", "--advertised-listeners",
                                         "--data-dir", "--memory", "--log-level", "--log-format", "--security",
                                         "--override"}
