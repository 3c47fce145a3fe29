"""Every subcommand's ``--help`` reads as help (issue 65, item 7): a plain description, no RST
markup, examples that parse, and ``--detector`` naming every registered detector.
"""

from __future__ import annotations

import shlex

import pytest

from conli import detectors
from conli.cli.app import COMMANDS, HELP, main, parser_for
from tests.support import word_detector  # registers the "word" detector, as a plug-in would


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_has_a_plain_description_and_examples(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    shown = _help(command, capsys)
    description = shown.split("\n\n", 2)[1]
    assert description.split()[0][0].isupper(), description  # a sentence, not a usage line
    assert "``" not in shown and ":func:" not in shown
    assert "\nexamples:\n  conli " in shown


@pytest.mark.parametrize(("command", "example"),
                         [(c, e) for c, (_, examples) in HELP.items() for e in examples])
def test_every_example_parses(command: str, example: str) -> None:
    words = shlex.split(example)
    while "=" in words[0]:  # VAR=value conli ...
        words.pop(0)
    if "<" in words:
        words = words[:words.index("<")]
    assert words[0] == "conli" and words[1] == command
    parser_for(words[1:]).parse_args(words[1:])


def test_detector_help_names_every_registered_detector(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert word_detector.WordDetector.name == "word"
    shown = " ".join(_help("check", capsys).split())
    for name in [*detectors.names(), "minicheck", "granite-guardian", "word"]:
        assert name in shown.split("one of: ", 1)[1]
