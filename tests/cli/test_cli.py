"""The CLI end to end through a scripted backend registered under the name ``fake``."""

import json

import pytest

from conli.backends import register_backend
from conli.backends.fake import ScriptedBackend
from conli.cli import app as cli
from tests.support.responders import rule_responder

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962. It charges two dollars per book."


@pytest.fixture(autouse=True)
def fake_backend():
    register_backend(
        "fake",
        lambda arg, settings: ScriptedBackend(
            responder=rule_responder(bad=("two dollars",)), context_window=2000
        ),
    )


@pytest.fixture
def files(tmp_path):
    def write(source: bytes | str = SOURCE, response: bytes | str = RESPONSE):
        src, resp = tmp_path / "source.txt", tmp_path / "response.txt"
        for path, data in ((src, source), (resp, response)):
            path.write_bytes(data.encode() if isinstance(data, str) else data)
        return ["--source", str(src), "--response", str(resp), "--llm", "fake"]

    return write


def test_json_output_is_the_documented_result_object(files, capsys):
    assert cli.main(["check", *files(), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "hallucinated"
    flagged = [s for s in result["sentences"] if s["verdict"] == "hallucinated"]
    assert [s["text"] for s in flagged] == ["It charges two dollars per book."]
    first = result["sentences"][0]
    assert {"text", "start", "end", "verdict", "detector", "reasons", "entities"} <= set(first)
    assert result["refined_text"] == "The library opened in 1962."
    raw, refined = result["judge_raw"], result["judge_refined"]
    assert (raw["mode"], raw["score"], refined["score"]) == ("grounded", 2.625, 5)
    assert raw["audit"]["sentences"][1]["verdict"] == "hallucinated"
    assert {"usage", "timings", "templates"} <= set(result)


def test_text_report_names_verdicts_reasons_rewrite_and_scores(files, capsys):
    assert cli.main(["check", *files()]) == 0
    out = capsys.readouterr().out
    assert "[BAD] It charges two dollars per book." in out
    assert "neutral: because neutral" in out
    assert "judge score, raw: 2" in out and "judge score, refined: 5" in out


def test_stdin_can_carry_the_response(files, monkeypatch, capsys, tmp_path):
    args = files()
    args[3] = "-"
    monkeypatch.setattr(
        "sys.stdin", type("S", (), {"buffer": __import__("io").BytesIO(RESPONSE.encode())})()
    )
    assert cli.main(["check", *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "hallucinated"


@pytest.mark.parametrize(
    ("source", "response", "message"),
    [
        ("", RESPONSE, "source is empty"),
        (SOURCE, "  \n\t", "response is empty"),
        (b"caf\xe9 au lait", RESPONSE, "not valid UTF-8"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", RESPONSE, "looks binary"),
        (SOURCE, "Word. " * 3000, "nothing was truncated"),  # a long source is windowed
    ],
)
def test_bad_input_is_a_clear_error_with_nothing_written(
    files, tmp_path, capsys, source, response, message
):
    out = tmp_path / "report.json"
    code = cli.main(["check", *files(source, response), "--json", "--output", str(out)])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
    assert list(tmp_path.glob(".report.json*")) == []


def test_missing_source_file_is_a_clear_error(tmp_path, capsys):
    resp = tmp_path / "r.txt"
    resp.write_text(RESPONSE)
    code = cli.main(
        ["check", "--source", str(tmp_path / "nope.txt"), "--response", str(resp), "--llm", "fake"]
    )
    assert code == 2
    assert "cannot read source file" in capsys.readouterr().err


def test_unknown_backend_lists_the_valid_ones(files, capsys):
    args = files()
    args[-1] = "nonsense"
    assert cli.main(["check", *args]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'nonsense'" in err and "local" in err


def test_output_file_gets_the_whole_report(files, tmp_path):
    out = tmp_path / "report.json"
    assert cli.main(["check", *files(), "--json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["verdict"] == "hallucinated"


def test_a_source_longer_than_the_context_is_read_in_windows(files, capsys):
    long_source = SOURCE + " The reading room is quiet." * 600  # ~16k chars, context 2,000
    assert cli.main(["check", *files(long_source, RESPONSE), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "hallucinated"
    windows = {j["source_window"] for s in result["sentences"] for j in s["judgements"]}
    assert None not in windows and len(windows) >= 1
    assert [s["verdict"] for s in result["sentences"]] == ["supported", "hallucinated"]
