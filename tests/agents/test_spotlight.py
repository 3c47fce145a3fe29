"""Spotlighting by datamarking (issue 61, Hines et al. 2024), through the real Checker.

With ``spotlight`` on, every prompt that reads the source or the response carries their
words joined by ``ˆ`` and opens with the rule that marked text is data; every answer is
read with the marks turned back into spaces, so quotes match the source and no rewrite
puts a mark into the user's text. Off (the default), no prompt changes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.prompts import render
from conli.prompts.boundary import TrustedData
from conli.prompts.spotlight import MARK, RULE, datamark, unmark
from tests.support.responders import SENTENCE, claims_of, kind_of

SOURCE = ["The Harbor Street Library opened in 1931. It has four floors.",
          "Its reading room seats 120 people."]
RESPONSE = "The Harbor Street Library opened in 1913. It has four floors."
MARKED_WORDS = f"The{MARK}Harbor{MARK}Street{MARK}Library{MARK}opened{MARK}in{MARK}1931."
_SOURCE_BLOCK = re.compile(r"<source>\n?(.*?)\n?</source>", re.DOTALL)


def _echoing(messages: list[Message]) -> str:
    """A model that quotes what it reads as it reads it, marks and all.

    NLI: entailment, quoting the first sentence of the source block; the rewrite: the
    flagged sentence as marked, with a fix; the judge: its first sentence as an error.
    """
    last = messages[-1]["content"]
    kind = kind_of(messages)
    if kind == "nli":
        blocks = _SOURCE_BLOCK.findall(last)
        quote = blocks[-1].split(".")[0] + "." if blocks else ""
        items = [{"id": i, "evidence": quote, "reasoning": f"it says{MARK}so",
                  "label": "contradiction" if "1913" in claim else "entailment"}
                 for i, claim in enumerate(claims_of(messages))]
        if '<claim id="' not in last:
            return json.dumps({k: v for k, v in items[0].items() if k != "id"})
        return json.dumps({"judgements": items})
    if kind == "mitigate":
        return json.dumps({"rewrites": [
            {"id": int(i), "fix": "year", "action": "rewrite",
             "text": text.replace("1913", "1931")} for i, text in SENTENCE.findall(last)]})
    if kind == "reasoning":
        return json.dumps({"reasoning": f"The{MARK}year{MARK}is{MARK}wrong."})
    text = last.split("<text>")[-1].split("</text>")[0].strip()
    return json.dumps({"errors": [{"sentence": text.split(".")[0] + ".", "problem": "year",
                                   "source": ""}], "score": 2})


def _check(spotlight: bool, **overrides: Any) -> tuple[CheckResult, ScriptedBackend]:
    backend = ScriptedBackend(responder=_echoing)
    settings = Settings(_env_file=None, detectors=["cot"], spotlight=spotlight,  # type: ignore[call-arg]
                        **overrides)
    with Checker(settings, backend=backend) as checker:
        return checker.check(SOURCE, RESPONSE), backend


@pytest.mark.parametrize("judge_mode", ["grounded", "rubric"])
def test_every_prompt_that_reads_data_marks_it_and_says_so(judge_mode: str) -> None:
    result, backend = _check(True, judge_mode=judge_mode)
    assert backend.calls
    for messages in backend.calls:
        text = "\n".join(m["content"] for m in messages)
        assert messages[0]["content"].startswith(RULE), kind_of(messages)
        assert "Harbor Street" not in text  # no data word left unmarked
        if kind_of(messages) != "reasoning":  # the grounded judge's reasoning reads no source
            assert MARKED_WORDS in text, kind_of(messages)
    nli = [m for m in backend.calls if kind_of(m) == "nli"]
    assert any(f"The{MARK}Harbor{MARK}Street{MARK}Library{MARK}opened{MARK}in{MARK}1913."
               in m[-1]["content"] for m in nli)  # the response's claims too
    assert result.templates and all(t.endswith("+datamark") or "+datamark+" in t
                                     for t in result.templates), result.templates


def test_the_worked_examples_are_marked_as_the_data_is() -> None:
    prompt = render("nli_sentence.v3", source="A b.", hypotheses=["A b."], cot=True,
                    question=None, spotlight=True)
    example = next(m["content"] for m in prompt.messages[1:] if m["role"] == "user")
    assert f"The{MARK}Riverside{MARK}Public{MARK}Library" in example  # a worked example
    assert "Judge the claim against the source." in example  # our words are not marked
    assert prompt.template == "nli_sentence.v3+datamark"


def test_quotes_and_rewrites_are_read_without_the_marks() -> None:
    result, _ = _check(True)
    wrong, right = result.sentences
    quoted = [j for s in result.sentences for j in s.judgements if j.evidence]
    assert quoted and all(MARK not in j.evidence for j in quoted)
    assert all(j.evidence_in_source for j in quoted)  # "The Harbor Street Library opened..."
    assert all(MARK not in j.reasoning for s in result.sentences for j in s.judgements)
    assert wrong.verdict == "hallucinated" and right.verdict == "supported"
    assert MARK not in result.refined_text and "opened in 1931" in result.refined_text
    change, = result.mitigation.changes
    assert MARK not in change.after
    judged = result.judge_raw
    assert judged is not None and MARK not in (judged.reasoning or "")


def test_off_no_prompt_is_marked() -> None:
    result, backend = _check(False)
    text = "\n".join(m["content"] for call in backend.calls for m in call)
    assert RULE not in text and MARKED_WORDS not in text
    assert "The Harbor Street Library opened in 1931." in text
    assert not any("+datamark" in t for t in result.templates)


def test_the_specialised_checkers_read_marked_data() -> None:
    backend = ScriptedBackend(responder=lambda messages: "Yes")
    settings = Settings(_env_file=None, detectors=["minicheck"], spotlight=True,  # type: ignore[call-arg]
                        judge=False, mitigate=False)
    with Checker(settings, backend=backend) as checker:
        result = checker.check(SOURCE, RESPONSE)
    documents = []
    for messages in backend.calls:  # each source is read apart, each marked
        assert messages[0]["content"].startswith(RULE)
        document = messages[-1]["content"].split("Document: ", 1)[1].split("\n", 1)[0]
        assert " " not in document
        documents.append(document)
    assert any(d.startswith(MARKED_WORDS) for d in documents)
    assert f"Its{MARK}reading{MARK}room{MARK}seats{MARK}120{MARK}people." in documents
    assert "minicheck.v1+datamark" in result.templates


def test_a_mark_in_the_data_itself_is_not_taken_for_ours() -> None:
    text = f"a{MARK}b c"
    marked = datamark(text)
    assert marked == f"a^b{MARK}c" and len(marked) == len(text)  # offsets hold
    assert unmark(f"it{MARK}says") == "it says"
    tagged = TrustedData("It opened in [ 1913 ] here")  # our markup keeps its spaces
    prompt = render("nli_entity.v3", source="x", hypotheses=[tagged], cot=True, question=None,
                    spotlight=True)
    assert f"It{MARK}opened{MARK}in{MARK}[ 1913 ]{MARK}here" in prompt.messages[-1]["content"]
