"""Messages that say what happened (issue 52.5): which candidate, null not missing, a
threshold line that cannot read as a contradiction, and the setting behind a chunk's limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.backends import register_backend
from conli.backends.fake import ScriptedBackend
from conli.batch.local import run
from conli.batch.work import make_worker
from conli.cli import app as cli
from conli.config import Settings
from conli.errors import InputTooLargeError
from conli.gate import gate_line
from conli.models import CheckResult
from conli.run.inputs import check_input
from tests.support.responders import rule_responder

SOURCE = "The library opened in 1962. It lends books free of charge."


def test_an_empty_candidate_among_several_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    register_backend("fake", lambda _a, _s: ScriptedBackend(responder=rule_responder()))
    src, good, empty = tmp_path / "s.txt", tmp_path / "good.txt", tmp_path / "empty.txt"
    src.write_text(SOURCE, "utf-8")
    good.write_text("The library opened in 1962.", "utf-8")
    empty.write_text("  \n", "utf-8")
    assert cli.main(["judge", "--source", str(src), "--response", str(good), "--response",
                     str(empty), "--llm", "fake"]) == 2
    err = capsys.readouterr().err
    assert f"--response {str(empty)!r}: response is empty" in err


def test_a_batch_record_whose_source_is_null_says_null_not_missing(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "a", "source": None, "response": "It opened."}) + "\n"
                   + json.dumps({"id": "b", "response": "It opened."}) + "\n", "utf-8")
    backend = ScriptedBackend(responder=rule_responder())
    run(src, out, make_worker(Settings(), "check", backend), concurrency=1, progress=False)
    errors = [json.loads(line)["error"]["message"] for line in out.read_text().splitlines()]
    assert errors[0] == "the record's 'source' is null; give the text"
    assert errors[1].startswith("the record has no 'source' field")


@pytest.mark.parametrize(("verdict", "score", "method", "says"), [
    ("supported", 1.0, "verdict", "support score 1 is the verdict standing in (score_method "
     "verdict), not a score that ranks, so threshold 0.5 cannot be passed"),
    ("supported", 0.4, "nli_logprob", "support score 0.4 by nli_logprob, threshold 0.5 not "
     "passed"),
    ("hallucinated", 0.8, "nli_logprob", "support score 0.8 by nli_logprob meets threshold "
     "0.5, but a hallucinated result never passes"),
    ("supported", None, None, "no support score to hold to threshold 0.5: not passed"),
])
def test_the_gate_line_never_reads_as_a_contradiction(
    verdict: str, score: float | None, method: str | None, says: str,
) -> None:
    result = CheckResult.model_construct(verdict=verdict, threshold=0.5, support_score=score,
                                         score_method=method)
    line = gate_line(result, "hallucinated")
    assert line.endswith(f"here: verdict {verdict}, {says}")


def test_a_chunk_over_the_limit_names_the_setting() -> None:
    with pytest.raises(InputTooLargeError) as refused:
        check_input(["The library opened in 1962.", "x" * 50], "It opened.",
                    max_source_chars=40, max_response_chars=100)
    assert "sources[1] has 50 characters" in str(refused.value)
    assert "CONLI_MAX_SOURCE_CHARS" in str(refused.value)
