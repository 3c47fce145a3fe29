"""What a specialised checker's answer means (issue 62.1, 62.4 and 65.6), through the CLI.

A MiniCheck or Granite Guardian server that answers prose holding "yes" gives no verdict
(it used to pass the sentence); such answers, and garbage, stop a batch as any invalid
answers do, and the records never answered run again on the re-run. With several sources,
the checker reads each on its own: every sentence's evidence names the user's source by its
0-based index, its reason says the same, and each source's P(supported) is in the result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conli.cli import app as cli
from tests.support.http_fakes import Reply, Request, openai_chat, serve
from tests.support.responders import rule_responder

pytestmark = pytest.mark.integration

SOURCE = "Ada Lovelace lived in London. In 1843 she published notes on the Analytical Engine."
RESPONSE = "Ada Lovelace lived in London. In 1843 she published notes on the engine."
# prose that holds the label word: MiniCheck's format, and Guardian's (where "yes" is the risk)
PROSE = {"minicheck": "I cannot tell whether the answer is yes or no.",
         "granite-guardian": "The response is not grounded; no evidence, yes risk."}
# the label tokens' P(Yes) in that prose: what read as supported before (MiniCheck's Yes,
# Guardian's low risk at its first label token, "no")
PROSE_P_YES = {"minicheck": 0.95, "granite-guardian": 0.05}
GARBAGE = "<html><body>Welcome to nginx!</body></html>"


def _token(text: str, p_yes: float = 0.95) -> dict[str, Any]:
    """A generated token; one that reads yes or no carries the Yes/No alternatives."""
    word = text.strip().strip(".,;").lower()
    if word not in ("yes", "no"):
        return {"token": text, "logprob": -0.01, "bytes": None, "top_logprobs": []}
    top = [{"token": "Yes", "logprob": math.log(p_yes), "bytes": None},
           {"token": "No", "logprob": math.log(1 - p_yes), "bytes": None}]
    chosen = top[0]["logprob"] if word == "yes" else top[1]["logprob"]
    return {"token": text, "logprob": chosen, "bytes": None, "top_logprobs": top}


def _answer(text: str, p_yes: float = 0.95) -> dict[str, Any]:
    """A chat completion of ``text``, each word a token with its log-probabilities."""
    body = openai_chat(text, completion=len(text.split()))
    pieces = [text.split(" ")[0]] + [" " + w for w in text.split(" ")[1:]]
    body["choices"][0]["logprobs"] = {"content": [_token(p, p_yes) for p in pieces]}
    return body


class Checker:
    """A checker server answering ``say(claim, document)`` to every question.

    A yes or no token in it carries P(Yes) ``p_yes`` (default: 0.05 for an answer that
    starts with No, else 0.95).
    """

    def __init__(self, say: Callable[[str, str], str], p_yes: float | None = None) -> None:
        self.say, self.p_yes = say, p_yes

    def __call__(self, request: Request) -> Reply:
        messages = request.body["messages"]
        text = messages[-1]["content"]
        if "\nClaim: " in text:  # MiniCheck's format
            document, claim = text.split("\nClaim: ", 1)
        else:  # Guardian on vLLM: the claim as the assistant's turn, the chunk as a document
            claim = text
            document = request.body["chat_template_kwargs"]["documents"][0]["text"]
        said = self.say(claim, document)
        p_yes = self.p_yes or (0.05 if said.lower().startswith("no") else 0.95)
        return Reply(200, _answer(said, p_yes))


def _llm(request: Request) -> Reply:
    """``--llm``: a model that follows the prompts (rewrites and judges), asked nothing here."""
    return Reply(200, openai_chat(rule_responder()(request.body["messages"])))


def _options(monkeypatch: pytest.MonkeyPatch, detector: str, url: str) -> None:
    monkeypatch.setenv("CONLI_DETECTOR_OPTIONS", json.dumps(
        {detector: {"llm": f"vllm:{url}/v1#checker"}}))


@pytest.mark.parametrize("detector", ["minicheck", "granite-guardian"])
def test_a_prose_answer_holding_yes_is_no_verdict(
        detector: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.txt").write_text(SOURCE)
    (tmp_path / "r.txt").write_text(RESPONSE)
    monkeypatch.setenv("CONLI_CACHE_DIR", str(tmp_path / "cache"))
    with serve(_llm) as llm, serve(
            Checker(lambda _c, _d: PROSE[detector], PROSE_P_YES[detector])) as checker:
        _options(monkeypatch, detector, checker.url)
        code = cli.main(["check", "--source", str(tmp_path / "s.txt"), "--response",
                         str(tmp_path / "r.txt"), "--llm", f"vllm:{llm.url}/v1#m", "--json",
                         "--detector", detector, "--no-mitigate", "--no-judge",
                         "--fail-on", "unverified"])
    result = json.loads(capsys.readouterr().out)
    assert code == 4  # the gate failed: nothing was verified
    assert result["verdict"] == "unverified" and result["passed"] is False
    for sentence in result["sentences"]:
        assert sentence["verdict"] == "unverified" and sentence["score"] is None
        assert "invalid answer" in sentence["reasons"][0]
        assert PROSE[detector][:30] in sentence["reasons"][0]


def _records(path: Path, count: int) -> None:
    path.write_text("".join(json.dumps({"id": f"r{i}", "source": SOURCE,
                                        "response": RESPONSE}) + "\n" for i in range(count)))


@pytest.mark.parametrize(("detector", "answer", "mode"), [
    ("minicheck", PROSE["minicheck"], "check"),
    ("minicheck", GARBAGE, "judge"),
    ("granite-guardian", PROSE["granite-guardian"], "judge"),
    ("granite-guardian", GARBAGE, "check"),
])
def test_a_batch_stops_on_unusable_checker_answers_and_reruns_those_records(
        detector: str, answer: str, mode: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _records(tmp_path / "in.jsonl", 12)
    out = tmp_path / "out.jsonl"
    said = [answer]
    good = "No" if detector == "granite-guardian" else "Yes"  # Guardian's "No": no risk

    def run() -> int:
        return cli.main(["batch", str(tmp_path / "in.jsonl"), str(out), "--mode", mode,
                         "--llm", f"vllm:{llm.url}/v1#m", "--detector", detector,
                         "--no-progress", "--concurrency", "1"])

    with serve(_llm) as llm, serve(Checker(lambda _c, _d: said[0])) as checker:
        _options(monkeypatch, detector, checker.url)
        assert run() == 3
        assert "stopped early" in capsys.readouterr().err
        stopped = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(stopped) == 5 and not any(r["ok"] for r in stopped)  # not done: retryable
        said[0] = good  # the endpoint is fixed
        assert run() == 0
    err = capsys.readouterr().err
    assert "0 already in OUT" in err  # the five stopped ones ran again
    done = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in done] == [f"r{i}" for i in range(12)]
    assert all(r["ok"] for r in done)
    if mode == "check":
        assert {r["result"]["verdict"] for r in done} == {"supported"}
    else:
        assert {r["result"]["judge"]["status"] for r in done} == {"scored"}


CHUNKS = ["The bridge opened in 1932.", "It has seven arches.", "Its engineer was Ada Byrne."]


def test_minicheck_reads_each_source_apart_and_names_it_as_every_door_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Three small chunks: each sentence's evidence is the chunk holding its fact (65.6)."""
    for i, chunk in enumerate(CHUNKS):
        (tmp_path / f"c{i}.txt").write_text(chunk)
    (tmp_path / "r.txt").write_text("It has seven arches. Its engineer was Ada Byrne. "
                                    "It is painted red.")
    facts = ("seven", "Byrne", "1932")

    def say(claim: str, document: str) -> str:
        return "Yes" if any(f in claim and f in document for f in facts) else "No"

    with serve(_llm) as llm, serve(Checker(say)) as checker:
        _options(monkeypatch, "minicheck", checker.url)
        code = cli.main(["check", *(a for i in range(3) for a in (
                         "--source", str(tmp_path / f"c{i}.txt"))),
                         "--response", str(tmp_path / "r.txt"), "--llm",
                         f"vllm:{llm.url}/v1#m", "--json", "--detector", "minicheck",
                         "--no-mitigate", "--no-judge"])
        asked = [r.body["messages"][-1]["content"] for r in checker.requests]
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    arches, engineer, red = result["sentences"]
    # one question a claim and a source: no chunk runs across two of the user's sources
    assert len(asked) == 3 * 3
    assert {a.split("\nClaim: ")[0] for a in asked} == {f"Document: {c}" for c in CHUNKS}
    for sentence, source in ((arches, 1), (engineer, 2)):
        assert sentence["verdict"] == "supported"
        (span,) = sentence["evidence"]
        assert (span["source"], span["start"], span["end"], span["relation"]) == (
            source, 0, len(CHUNKS[source]), "supports")
        assert span["text"] == CHUNKS[source]
        assert sentence["judgements"][0]["reasoning"].endswith(
            f"closest: source {source}, offsets 0-{len(CHUNKS[source])}")
        scores = sentence["judgements"][0]["chunk_scores"]
        assert [c["source"] for c in scores] == [0, 1, 2]
        assert [c["best"] for c in scores] == [i == source for i in range(3)]
        assert scores[source]["score"] == pytest.approx(0.95)
        assert all(c["score"] == pytest.approx(0.05) for i, c in enumerate(scores)
                   if i != source)
    assert red["verdict"] == "hallucinated" and red["evidence"] == []
    assert red["reasons"][0].startswith("MiniCheck: P(supported) 0.05; closest: source ")
    assert [c["score"] for c in red["judgements"][0]["chunk_scores"]] == pytest.approx(
        [0.05] * 3)
