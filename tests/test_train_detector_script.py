"""train_detector.py and calibration_gain.py (benchmarks/experiments/issue-28-detector-training/):
the held-out rows are really held out.

The shipped weights' first held-out figure rests on knowing which dev examples they were
trained on; the list is rebuilt from their manifest and must match the run they read.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from conli.evaluation import paired
from conli.evaluation.paired import gain_interval, trained_on, with_v1_nli
from conli.signals.model import FUSED_ARTIFACT, load_model
from conli.training.data import ExampleRows, SentenceRow
from conli.training.train import HeldOut
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def _load(name: str) -> ModuleType:
    return load_script(next((ROOT / "benchmarks").glob(f"**/{name}.py")), name)


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")
def test_the_shipped_weights_training_rows_are_the_run_they_read() -> None:
    seen = trained_on(load_model(FUSED_ARTIFACT), DATA)
    run = ROOT / "benchmarks" / "results" / "detect-default" / "predictions.jsonl"
    order = [json.loads(line)["example_id"] for line in run.read_text().splitlines()]
    assert len(seen) == 291 and seen == set(order[:291])


def test_one_command_rebuilds_fused_v1s_recipe_byte_for_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the repository alone: the collection's features and the v1 run's judgements."""
    trainer = _load("train_detector")
    monkeypatch.chdir(ROOT)  # the command as documented, from the checkout
    out = tmp_path / "fused.json"
    assert trainer.main(["rebuild-fused", "--out", str(out)]) == 0
    stored = ROOT / "benchmarks" / "results" / "fused-rebuild" / "fused.v2.json"
    assert out.read_bytes() == stored.read_bytes()
    # the shipped fused.v1, read from another output head, is the same model within 3%
    rebuilt, shipped = load_model(out), load_model(FUSED_ARTIFACT)
    assert rebuilt.features == shipped.features
    assert abs(rebuilt.threshold - shipped.threshold) < 1e-3
    assert all(abs(a - b) < 0.03 * abs(b) for a, b in zip(rebuilt.coef, shipped.coef,
                                                          strict=True))


def test_halves_split_each_label_evenly_and_cover_every_row() -> None:
    gain = _load("calibration_gain")
    rows = [ExampleRows("d", f"x{i}", i % 3 == 0, [SentenceRow(0, {}, None)]) for i in range(30)]
    first, second = gain.halves(rows, seed=0)
    assert sorted(first + second) == list(range(30)) and not set(first) & set(second)
    assert sum(rows[i].label for i in first) == sum(rows[i].label for i in second) == 5


def _held(rows: list[ExampleRows], predicted: list[bool]) -> HeldOut:
    return HeldOut("d", len(rows), None, 0.0, None, None, [0.0] * len(rows),
                   [r.label for r in rows], predicted)


def test_the_gain_over_cot_is_zero_for_cots_own_decisions_and_clear_for_a_better_one() -> None:
    cot = ["hallucinated", "supported"]
    rows = [ExampleRows("d", f"x{i}", i % 2 == 0, [SentenceRow(0, {}, None, cot[i % 4 // 2])])
            for i in range(40)]  # cot flags half of each label: BAcc 0.5
    same = gain_interval([_held(rows, [r.cot_flagged() for r in rows])], rows)
    assert same == (0.0, 0.0, 0.0)
    better = gain_interval([_held(rows, [r.label for r in rows])], rows)
    assert better[0] == pytest.approx(0.5) and 0.2 < better[1] <= better[0] <= better[2]


def test_a_runs_verdicts_are_paired_with_cots_on_the_examples_both_decided(
        tmp_path: Path) -> None:
    paired_gain = _load("paired_gain")
    cot = ["hallucinated", "supported"]
    rows = [ExampleRows("d", f"x{i}", i % 2 == 0, [SentenceRow(0, {}, None, cot[i % 4 // 2])])
            for i in range(40)]  # cot flags half of each label: BAcc 0.5
    run = tmp_path / "predictions.jsonl"
    records = [{"example_id": r.example_id, "predicted": "hallucinated" if r.label else
                "supported", "error": None} for r in rows[:36]]  # a run that is always right
    records.append({"example_id": "x36", "predicted": None, "error": "backend failed"})
    run.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    report = paired.compare(rows, paired.run_flags(paired.read_run(run)))
    assert report["n"] == 36  # undecided and errored examples are left out, not counted wrong
    chosen_on = tmp_path / "chosen.jsonl"  # examples a rule was chosen on are left out
    chosen_on.write_text("\n".join(json.dumps(r) for r in records[:10]) + "\n")
    assert [r["example_id"] for r in paired.read_run(run, chosen_on)] == [
        f"x{i}" for i in range(10, 36)]
    assert report["run"]["per_set"]["d"] == 1.0 and report["cot"]["d"] == 0.5
    assert report["run"]["gain_interval"][0] == pytest.approx(0.5)
    # flagging only where both flag keeps cot's misses and drops its false flags: 0.75
    assert report["both flag"]["per_set"]["d"] == pytest.approx(0.75)
    assert report["flips"] == {"hallucinated, now flagged": 9, "faithful, now passed": 9}
    assert "+50.0" in paired_gain.markdown(report) and "auroc" not in report
    # with scores: the run ranks perfectly, cot's one support value ranks at chance
    cot_rows = [ExampleRows(r.dataset, r.example_id, r.label,
                            [SentenceRow(0, {"nli_support": 0.5}, None, r.sentences[0].cot)])
                for r in rows]
    scores = {r.example_id: 0.1 if r.label else 0.9 for r in rows[:36]}
    run.write_text("\n".join(json.dumps({**r, "support_score": scores.get(r["example_id"])})
                             for r in records) + "\n")
    scored = paired.compare(cot_rows, paired.run_flags(paired.read_run(run)),
                            paired.run_scores(paired.read_run(run)))
    assert scored["auroc"] == {"cot": 0.5, "run": 1.0}
    assert "the run 100.0" in paired_gain.markdown(scored)


def test_cot_errors_counts_misses_and_false_alarms_with_their_lengths(tmp_path: Path) -> None:
    errors = _load("cot_errors")

    def record(gold: bool, flags: list[bool], words: int) -> dict[str, object]:
        sentences = [{"checked": True, "text": " ".join(["w"] * words),
                      "judgements": [{"features": {"nli_flagged": float(f)}}]} for f in flags]
        return {"dataset": "d", "gold": gold, "error": None, "result": {"sentences": sentences}}

    records = [record(True, [False, False], 30), record(True, [False, True], 10),
               record(False, [True], 12), record(False, [False], 8),
               {"dataset": "d", "gold": True, "error": "backend failed", "result": None}]
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    rows = errors.outcomes(path)
    assert len(rows) == 4  # the failed example is not an outcome of cot's
    text = errors.table(rows)
    assert "| d | 2 | 1 | 2 | 1 |" in text
    assert "| missed | 1 | 30 | 1 |" in text and "| false alarm | 1 | 12 | 0 |" in text


def test_looks_gain_reads_each_rule_off_the_recorded_looks(tmp_path: Path) -> None:
    looks = _load("looks_gain")

    def judged(detector: str, scores: list[float]) -> dict[str, object]:
        verdict = "supported" if 2 * sum(scores) > len(scores) else "hallucinated"
        return {"detector": detector, "verdict": verdict, "looks": [
            {"verdict": "supported" if x else "hallucinated", "score": x} for x in scores]}

    def record(name: str, *sentences: list[dict[str, object]]) -> dict[str, object]:
        return {"example_id": name, "error": None, "result": {
            "sentences": [{"judgements": list(j)} for j in sentences]}}

    records = [
        record("flag-then-pass", [judged("sentence_nli", [0.0, 1.0, 1.0])]),
        record("pass-then-flag", [judged("sentence_nli", [1.0, 0.0, 0.0])]),
        record("entity", [judged("sentence_nli", [1.0, 1.0, 0.0]),
                          judged("entity_nli", [0.0, 0.0, 1.0])]),
        record("unverified", [{"detector": "sentence_nli", "verdict": "unverified"}]),
    ]
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    expect = {  # rule -> flags of the four examples, and how many it reads unsure
        "greedy look alone": ([True, False, True, True], 1),
        "vote (what runs)": ([False, True, True, True], 0),
        "look again where the first flags": ([False, False, True, True], 1),
        "look again where the first passes": ([True, True, True, True], 0),
    }
    for name, (flags, unsure) in expect.items():
        found, uncertain = looks.read_flags(paired.read_run(path), looks.READS[name])
        assert list(found.values()) == flags, name
        assert uncertain == unsure, name
    # cost: the greedy look replayed, so decode is the two sampled looks' (4 s + 8 s)
    for r, decode in zip(records, [4.0, 8.0, 0.0, 0.0], strict=True):
        r["result"]["usage"] = {"prefill_seconds": 10.0, "decode_seconds": decode,  # type: ignore[index]
                                "completion_tokens": 100}
    spent = looks.cost(records)
    assert spent["sampled_decode_seconds"] == 3.0 and spent["fresh_seconds_one_look"] == 11.5
    assert spent["fresh_seconds_k_looks"] == 14.5 and spent["looks"] == 3
    # looks only where the first flagged: a claim with one look, so no fresh-run estimate
    records.append(record("passed once", [{"detector": "sentence_nli", "verdict": "supported"}]))
    records[-1]["result"]["usage"] = {"prefill_seconds": 10.0, "decode_seconds": 0.0,  # type: ignore[index]
                                      "completion_tokens": 50}
    partial = looks.cost(records)
    assert partial["sampled_decode_seconds"] == 2.4 and "ratio" not in partial


def test_v1_training_rows_take_nli_from_the_v1_run_and_the_reading_from_the_collection(
) -> None:
    from conli.training.data import read_rows

    _, rows = read_rows(ROOT / "benchmarks" / "data" / "features" / "dev.jsonl")
    rows = rows[:60]
    v1_rows, unmatched = with_v1_nli(rows, ROOT / "benchmarks" / "results" / "detect-default")
    assert unmatched == 0 and [r.example_id for r in v1_rows] == [r.example_id for r in rows]
    pairs = [(a, b) for r, v in zip(rows, v1_rows, strict=True)
             for a, b in zip(r.sentences, v.sentences, strict=True)]
    assert all(a.values["pmi_low"] == b.values["pmi_low"] and a.label == b.label
               for a, b in pairs)  # the reading and the labels are the collection's
    assert any(a.values["nli_support"] != b.values["nli_support"] for a, b in pairs)


def test_compare_artifacts_lists_the_decisions_that_differ() -> None:
    compare = _load("compare_artifacts")
    model = load_model(FUSED_ARTIFACT)
    stricter = replace(model, version="stricter", threshold=0.0)  # flags every response
    rows = [ExampleRows("d", f"x{i}", i % 2 == 0,
                        [SentenceRow(0, {"pmi_low": 0.0, "nli_support": 1.0,
                                         "nli_flagged": 0.0, "novel_numbers": 0.0}, None)])
            for i in range(4)]  # all pass under the shipped weights
    text = compare.table(model, stricter, rows)
    assert "4 of 4 decisions differ" in text and "| d | 50.0 | 50.0 |" in text
    assert "x1 (faithful): passed by fused.v1, flagged by stricter" in text
