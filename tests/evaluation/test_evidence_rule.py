"""evidence_rule.py (benchmarks/experiments/issue-51-defences/): a supported sentence whose
quoted evidence is absent is caught."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT
from tests.support.scripts import load_script

SCRIPT = ROOT / "benchmarks" / "experiments" / "issue-51-defences" / "evidence_rule.py"
SOURCE_QUOTE = "Six men were arrested in Minneapolis"


def _sentence(index: int, text: str, evidence: str, in_source: bool,
              entities: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    judgement = {"detector": "fused", "hypothesis": text, "verdict": "supported",
                 "label": "entailment", "evidence": evidence,
                 "evidence_in_source": in_source, "score": 0.9,
                 "features": {"nli_flagged": 0.0, "nli_support": 0.98}}
    return {"index": index, "text": text, "start": 0, "end": len(text), "checked": True,
            "verdict": "supported", "entities": entities or [], "judgements": [judgement]}


def _record(example_id: str, gold: bool, sentences: list[dict[str, Any]]) -> dict[str, Any]:
    return {"example_id": example_id, "dataset": "toy", "gold": gold,
            "predicted": "supported", "error": None,
            "result": {"verdict": "supported", "sentences": sentences}}


def _write(path: Path) -> Path:
    records = [
        # hallucinated: passed on an entailment whose quote the source never gives
        _record("toy:1", True, [_sentence(0, "Seven men were stopped at JFK.",
                                          "Seven men were stopped at JFK airport", False)]),
        # faithful: its quote is in the source, and its number too
        _record("toy:2", False, [_sentence(
            0, "Six men were arrested.", SOURCE_QUOTE, True,
            [{"text": "Six", "label": "CARDINAL", "category": "Quantity", "start": 0,
              "end": 3, "in_source": True}])]),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_supported_sentence_with_an_absent_quote_is_changed(tmp_path: Path) -> None:
    script = load_script(SCRIPT, "evidence_rule")
    predictions = _write(tmp_path / "predictions.jsonl")
    out = tmp_path / "out"
    assert script.main(["--predictions", str(predictions), "--skip", "0", "--draws", "50",
                        "--out", str(out)]) == 0

    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert report["checks"]["stored predictions"]["prediction_recomputed"] == 2
    for detector in ("fused", "cot"):
        variants = report["detectors"][detector]["variants"]
        flagged = variants["a flag"]
        assert flagged["changed"]["toy"] == {
            "responses": 1, "faithful": 0, "hallucinated": 1,
            "moves": {"hallucinated: supported -> hallucinated": 1}}
        row = flagged["decision"]["per_set"]["toy"]
        assert (row["current"], row["candidate"]) == (0.5, 1.0)
        # unverified is the wrong class: the miss stays a miss
        unverified = variants["a unverified"]
        assert unverified["changed"]["toy"]["moves"] == {
            "hallucinated: supported -> unverified": 1}
        assert unverified["decision"]["per_set"]["toy"]["candidate"] == 0.5
        # the faithful response's number is in its source: (b) changes nothing
        assert variants["b flag"]["changed"]["toy"]["responses"] == 0
        assert report["detectors"][detector]["firing"]["toy"]["a:sentences"] == 1

    changes = [json.loads(line) for line in
               (out / "changes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {(c["detector"], c["example_id"], c["after (a)+(b) flag"]) for c in changes} == {
        ("fused", "toy:1", "hallucinated"), ("cot", "toy:1", "hallucinated")}
    assert all("quoted evidence is not in the source" in c["reason"] for c in changes)
    assert "| toy | 2 (1) | 50.0 | 100.0 |" in (out / "results.md").read_text(encoding="utf-8")


def test_an_absent_decisive_number_is_caught_but_not_a_description(tmp_path: Path) -> None:
    script = load_script(SCRIPT, "evidence_rule")
    raw = _sentence(0, "Seven Americans left.", SOURCE_QUOTE, True, [
        {"text": "Seven", "label": "CARDINAL", "category": "Quantity", "start": 0, "end": 5,
         "in_source": False},
        {"text": "Americans", "label": "NORP", "category": "PersonType", "start": 6,
         "end": 15, "in_source": False}])
    sentence = script.sentence_of(raw, script.DECISIVE)
    assert sentence.absent == (("Seven", "Quantity"),)
    assert sentence.fires("b") and not sentence.fires("a")
    record = script.Record("toy:3", "toy", False, "supported", [sentence])
    done = script.apply(record, script.DETECTORS["cot"], ("b",), "flag")
    assert (done.before, done.after) == ("supported", "hallucinated")
    assert done.changed[0][2] == 'the source never states "Seven" (Quantity)'
