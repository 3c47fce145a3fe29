"""The one comparer (conli eval compare / decide): stored runs read as sides, paired, decided.

Every side is a stored run read one way (``conli.evaluation.sides``); the rule's figures
come from ``rule.decide`` on the examples both sides hold. The predictions log is read by
one reader, plain or gzipped, and an errored or unverified prediction is the wrong class.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conli.backends import register_backend
from conli.cli.app import main
from conli.errors import ConfigError, InputError
from conli.evaluation import detection
from conli.evaluation.compare import Comparison, pair, run_comparison, two_runs
from conli.evaluation.metrics import flag
from conli.evaluation.sides import Item, Side, read_side
from conli.signals.model import FUSED_ARTIFACT, load_model
from conli.training.data import ExampleRows, SentenceRow, write_rows
from tests.support.eval_fakes import backend as fake_backend
from tests.support.paths import TESTS

FIXTURE = TESTS / "fixtures" / "eval_sample.jsonl"
register_backend("comparefake", lambda _arg, _settings: fake_backend())


def _run(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _record(i: int, predicted: str, **extra: Any) -> dict[str, Any]:
    return {"example_id": f"x{i}", "dataset": "d", "gold": i % 2 == 0, "predicted": predicted,
            "error": None, **extra}


def test_the_one_flag_scores_unverified_and_errored_as_the_wrong_class() -> None:
    assert flag("hallucinated", True) == 1.0 and flag("supported", True) == 0.0
    assert flag("unverified", True) == 0.0 and flag("unverified", False) == 1.0
    assert flag("hallucinated", True, errored=True) == 0.0  # an error never counts as right
    assert flag("supported", False, errored=True) == 1.0


def test_a_run_is_paired_with_cots_recorded_verdicts_and_errors_count_wrong(
        tmp_path: Path) -> None:
    cot = ["hallucinated", "supported"]
    rows = [ExampleRows("d", f"x{i}", i % 2 == 0, [SentenceRow(0, {"nli_support": 0.5}, None,
                                                              cot[i % 4 // 2])])
            for i in range(40)]  # cot flags half of each label: BAcc 0.5
    features = tmp_path / "dev.jsonl"
    write_rows(features, rows, {})
    records = [_record(i, "hallucinated" if i % 2 == 0 else "supported") for i in range(36)]
    records.append({**_record(36, "unverified"), "error": "backend failed"})  # gold True
    run = _run(tmp_path / "run", records)
    outcome = run_comparison(Comparison(name="run against cot", candidate=Side(run=str(run)),
                                        current=Side(run=str(features), read="cot")))
    decision = outcome.decision
    assert decision.n == {"d": 37}  # the errored example is paired, not dropped
    assert decision.current["d"] == pytest.approx((10 / 19 + 9 / 18) / 2)
    assert decision.candidate["d"] == pytest.approx((18 / 19 + 1) / 2)  # its miss counts
    assert outcome.changed == {"faithful, now passed": 9, "hallucinated, now flagged": 9,
                               "hallucinated, now passed": 1}
    table = outcome.markdown()
    assert "| d | 37 (19) | 97.4 | 51.3 |" in table and "faithful, now passed: 9" in table


def test_each_looks_reading_is_read_off_the_recorded_looks(tmp_path: Path) -> None:
    def judged(detector: str, scores: list[float]) -> dict[str, Any]:
        verdict = "supported" if 2 * sum(scores) > len(scores) else "hallucinated"
        return {"detector": detector, "verdict": verdict, "looks": [
            {"verdict": "supported" if x else "hallucinated", "score": x} for x in scores]}

    sentences = [[judged("sentence_nli", [0.0, 1.0, 1.0])],
                 [judged("sentence_nli", [1.0, 0.0, 0.0])],
                 [judged("sentence_nli", [1.0, 1.0, 0.0]), judged("entity_nli", [0.0, 0.0, 1.0])],
                 [{"detector": "sentence_nli", "verdict": "unverified"}]]
    records = [_record(i, "supported", result={"sentences": [{"judgements": js}]})
               for i, js in enumerate(sentences)]
    run = _run(tmp_path / "run", records)
    expect = {"looks-greedy": [1, 0, 1, 1], "looks-vote": [0, 1, 1, 1],
              "looks-again-where-flagged": [0, 0, 1, 1], "looks-again-where-passed": [1, 1, 1, 1]}
    for read, flags in expect.items():
        found = read_side(Side(run=str(run), read=read))
        assert [item.value for item in found.values()] == flags, read


def test_scores_as_a_backend_without_log_probabilities_gives_them(tmp_path: Path) -> None:
    looks = [{"verdict": "supported", "score": 0.9}, {"verdict": "hallucinated", "score": 0.2},
             {"verdict": "supported", "score": 0.7}]
    judgement = {"detector": "sentence_nli", "verdict": "supported", "score": 0.6, "looks": looks}
    result = {"sentences": [{"checked": True, "judgements": [judgement]},
                            {"checked": False, "judgements": []}]}
    one_look = {"sentences": [{"checked": True, "judgements": [
        {"detector": "sentence_nli", "verdict": "supported"}]}]}
    run = _run(tmp_path / "run", [_record(0, "supported", result=result),
                                  _record(1, "supported", result=one_look)])
    values = {read: [i.value for i in read_side(Side(run=str(run), read=read)).values()]
              for read in ("score-logprobs", "score-logprobs-mean", "score-looks", "score-verdict")}
    # 1 - score; the example whose judgement has no looks is not read by any of them
    assert values == {"score-logprobs": [pytest.approx(0.1)],
                      "score-logprobs-mean": [pytest.approx(0.4)],
                      "score-looks": [pytest.approx(1 / 3)], "score-verdict": [0.0]}


def test_two_fused_artifacts_are_compared_on_the_features_file(tmp_path: Path) -> None:
    model = load_model(FUSED_ARTIFACT)
    stricter = tmp_path / "stricter.json"
    stricter.write_text(json.dumps(replace(model, version="stricter", threshold=0.0).to_json()))
    rows = [ExampleRows("d", f"x{i}", i % 2 == 0,
                        [SentenceRow(0, {"pmi_low": 0.0, "nli_support": 1.0,
                                         "nli_flagged": 0.0, "novel_numbers": 0.0}, None)])
            for i in range(4)]  # all pass under the shipped weights
    features = tmp_path / "dev.jsonl"
    write_rows(features, rows, {})
    outcome = run_comparison(Comparison(
        name="a", draws=100,
        candidate=Side(run=str(features), read="artifact", artifact=str(stricter)),
        current=Side(run=str(features), read="artifact", artifact=str(FUSED_ARTIFACT))))
    assert outcome.decision.candidate == outcome.decision.current == {"d": 0.5}
    assert outcome.changed == {"faithful, now flagged": 2, "hallucinated, now flagged": 2}
    assert "| d | 4 (2) | 50.0 | 50.0 |" in outcome.markdown()
    with pytest.raises(ConfigError, match="artifact = the fused model file"):
        read_side(Side(run=str(features), read="artifact"))


def test_conli_eval_compare_pairs_two_rewrite_runs_on_three_qualities(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def rewrites(folder: Path, clean: list[bool], judge: list[int]) -> Path:
        folder.mkdir()
        rows = [{"dataset": f"set{i % 2}", "example_id": str(i), "label": True, "clean": c,
                 "judge_refined": j, "rouge_l_vs_raw": 0.5, "refined": f"text {c} {j}"}
                for i, (c, j) in enumerate(zip(clean, judge, strict=True))]
        (folder / "rewrites.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return folder

    current = rewrites(tmp_path / "own", [False] * 12, [1] * 12)
    candidate = rewrites(tmp_path / "shared", [True] * 12, [5] * 12)
    assert main(["eval", "compare", str(candidate), str(current), "--out",
                 str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    gains = {d["compare"]["candidate"]["read"]: d["decision"]["mean"]["gain"]
             for d in result["decisions"]}
    assert gains == {"rewrite-clean": 1.0, "rewrite-judge": 1.0, "rewrite-kept": 0.0}
    assert result["provenance"]["command"] and result["kind"] == "decide"
    assert "## shared against own, rewrite-clean" in capsys.readouterr().out


def test_a_decision_config_is_decided_from_its_stored_runs(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    new = _run(tmp_path / "new", [_record(i, "hallucinated" if i % 2 == 0 else "supported")
                                  for i in range(20)])
    old = _run(tmp_path / "old", [_record(i, "supported") for i in range(20)])
    config = tmp_path / "runs" / "pick.toml"
    config.parent.mkdir()
    config.write_text(f'task = "decide"\n\n[[compare]]\nname = "new against old"\n'
                      f'candidate = {{ run = "{new}" }}\ncurrent = {{ run = "{old}" }}\n')
    assert main(["eval", "decide", str(config), "--out", str(tmp_path / "d")]) == 0
    shown = capsys.readouterr().out
    assert "| d | 20 (10) | 100.0 | 50.0 | +50.0 [+" in shown and "candidate (new) wins" in shown
    written = json.loads((tmp_path / "d" / "results.json").read_text())
    assert written["decisions"][0]["decision"]["wins"] is True
    assert written["provenance"]["config"] == str(config)
    other = tmp_path / "runs" / "detect.toml"
    other.write_text('task = "detect"\n')
    assert main(["eval", "decide", str(other)]) == 2  # not a decision: refused
    assert "not a decision" in capsys.readouterr().err


def test_runs_that_are_not_of_the_same_examples_are_refused(tmp_path: Path) -> None:
    a = {("d", "x"): Item("d", True, 1.0)}
    with pytest.raises(InputError, match="disagree on its set or gold label"):
        pair(a, {("d", "x"): Item("d", False, 1.0)}, "sorted")
    left = _run(tmp_path / "a", [_record(0, "supported")])
    right = _run(tmp_path / "b", [{**_record(0, "supported"), "example_id": "other"}])
    with pytest.raises(ConfigError, match="no example is in both sides"):
        run_comparison(two_runs(left, right, None, None)[0])
    with pytest.raises(ConfigError, match="unknown read 'guess'"):
        read_side(Side(run=str(left), read="guess"))
    with pytest.raises(ConfigError, match="no such stored run"):
        read_side(Side(run=str(tmp_path / "gone")))


def test_the_predictions_log_is_read_plain_or_gzipped_never_both(tmp_path: Path) -> None:
    records = [_record(i, "supported") for i in range(3)]
    run = _run(tmp_path / "run", records)
    plain = detection.read_predictions(run)
    assert detection.compress_predictions(run, over=10**9) is False  # small: left as it is
    digest = detection.predictions_digest(run)
    assert detection.compress_predictions(run, over=0) is True
    assert not (run / "predictions.jsonl").exists()
    assert detection.read_predictions(run) == plain
    assert detection.read_predictions(run / "predictions.jsonl") == plain  # either name
    assert detection.predictions_digest(run) == digest  # the hash does not see the packing
    (run / "predictions.jsonl").write_text("")
    with pytest.raises(InputError, match="holds both"):
        detection.read_predictions(run)
    (run / "predictions.jsonl").unlink()
    (run / "predictions.jsonl.gz").write_bytes(gzip.compress(b'{"a": 1}\nnot json\n'))
    with pytest.raises(InputError, match="line 2 of"):
        detection.read_predictions(run)


def test_a_detect_run_resumes_from_its_gzipped_log(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["eval", "detect", "--file", str(FIXTURE), "--llm", "comparefake", "--no-cache",
            "--out", str(out)]
    assert main(argv) == 0
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines[:2]) + "\n")  # a partial run
    assert detection.compress_predictions(out, over=0)
    assert main(argv) == 0  # goes on: the stored log unzipped, the rest appended to it
    assert not (out / "predictions.jsonl.gz").exists()
    again = (out / "predictions.jsonl").read_text().splitlines()
    assert again[:2] == lines[:2] and len(again) == 4
    assert sorted(json.loads(line)["example_id"] for line in again) == ["s1", "s2", "s3", "s4"]
