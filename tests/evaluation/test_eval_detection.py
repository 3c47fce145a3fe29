"""Sampling, sentence alignment, ablations, the run over a real Checker, and `conli eval`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.backends import register_backend
from conli.backends.base import Backend
from conli.cli.app import main
from conli.config import Settings
from conli.errors import EmptyInputError, InputError
from conli.evaluation import detection
from conli.evaluation import judge_eval as je
from conli.evaluation.loaders import Example, load_jsonl
from conli.evaluation.rewrite import redetect, rewrite_report
from conli.models import CheckResult, SentenceResult
from conli.pipeline import Checker
from tests.support.eval_fakes import backend as fake_backend
from tests.support.paths import TESTS

FIXTURE = TESTS / "fixtures" / "eval_sample.jsonl"
CALLS: list[int] = []


def _factory(_arg: str, _settings: Settings) -> Backend:
    fake = fake_backend()
    CALLS.append(1)
    original = fake.complete

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        CALLS.append(2)
        return original(*args, **kwargs)

    fake.complete = counting  # type: ignore[method-assign]
    return fake


register_backend("evalfake", _factory)


def _examples(n_pos: int, n_neg: int) -> list[Example]:
    return [Example(f"e{i}", "s", "r", i < n_pos, "d") for i in range(n_pos + n_neg)]


def test_stratified_sample_keeps_proportions_and_is_seeded() -> None:
    data = _examples(20, 80)
    sample = detection.stratified_sample(data, 10, seed=3)
    assert len(sample) == 10 and sum(e.label for e in sample) == 2
    assert sample == detection.stratified_sample(data, 10, seed=3)
    assert sample != detection.stratified_sample(data, 10, seed=4)
    assert [e.id for e in sample] == sorted((e.id for e in sample), key=lambda s: int(s[1:]))
    rare = detection.stratified_sample(_examples(1, 99), 5, seed=0)
    assert sum(e.label for e in rare) == 1  # a rare class is kept
    assert detection.stratified_sample(data, None, seed=0) == data


def test_run_order_is_seeded_and_interleaves_sets() -> None:
    a = [Example(f"a{i}", "s", "r", i % 2 == 0, "A") for i in range(6)]
    b = [Example(f"b{i}", "s", "r", i % 2 == 0, "B") for i in range(2)]
    order = detection.run_order([a, b], seed=0)
    assert sorted(e.id for e in order) == sorted(e.id for e in a + b)
    assert [e.dataset for e in order[:4]] == ["A", "B", "A", "B"]  # a cut run covers both
    assert order == detection.run_order([a, b], seed=0)
    assert detection.run_order([a], seed=0) != detection.run_order([a], seed=1)


def _sentence(i: int, start: int, end: int, verdict: str | None, checked: bool = True
              ) -> SentenceResult:
    return SentenceResult(index=i, text="x", start=start, end=end, checked=checked,
                          verdict=verdict)  # type: ignore[arg-type]


def test_align_sentences_by_overlap() -> None:
    response = "One two three. Four five six. Seven eight."
    gold = (("One two three.", False), ("Four five six.", True), ("Seven eight.", False))
    predicted = [_sentence(0, 0, 29, "hallucinated"), _sentence(1, 30, 42, "unverified")]
    verdicts, uncovered = detection.align_sentences(response, gold, predicted)
    assert verdicts == ["hallucinated", "hallucinated", "unverified"] and uncovered == 0
    only_first = [_sentence(0, 0, 14, "supported")]
    verdicts, uncovered = detection.align_sentences(response, gold, only_first)
    assert verdicts == ["supported", "supported", "supported"] and uncovered == 2


def test_ablation_settings() -> None:
    base = Settings(llm="local")
    assert detection.ablation_settings("sentence", base).entity_level is False
    no_cot = detection.ablation_settings("hierarchical-no-cot", base)
    assert no_cot.entity_level is True and no_cot.chain_of_thought is False
    if "sentence_level" not in Settings.model_fields:
        with pytest.raises(ValueError, match="sentence_level"):
            detection.ablation_settings("entity", base)


def test_run_over_a_real_checker_scores_by_hand() -> None:
    examples = load_jsonl(FIXTURE)
    checker = Checker(Settings(llm="local", mitigate=False, judge=True), fake_backend())
    outcomes = detection.run_detection(checker, examples)
    assert [o.predicted for o in outcomes] == ["supported", "hallucinated", "supported",
                                               "hallucinated"]
    assert [o.flagged_share for o in outcomes] == [0.0, 0.5, 0.0, 1.0]
    assert outcomes[1].sentence_predicted == ["supported", "hallucinated"]
    scores = detection.score_outcomes(outcomes)["datasets"]["eval_sample"]
    assert scores["response"]["f1_macro"] == 1.0
    assert scores["response"]["auroc"]["judge_inverted"]["value"] == 1.0
    assert scores["sentence"]["confusion"] == {"tp": 1, "fn": 0, "fp": 0, "tn": 3,
                                               "unverified_pos": 0, "unverified_neg": 0}


class _Refusing:
    def check(self, source: str, response: str, question: str | None = None) -> CheckResult:
        raise EmptyInputError("the response is empty")


def test_refused_input_is_unverified_not_dropped() -> None:
    [outcome] = detection.run_detection(_Refusing(), [Example("a", "s", "r", True, "d")])
    assert outcome.predicted == "unverified" and outcome.error == "the response is empty"
    report = detection.score_outcomes([outcome])["datasets"]["d"]["response"]
    assert report["unverified"] == 1 and report["f1_hallucinated"] == 0.0


def test_rewrite_report_with_a_scripted_editor() -> None:
    examples = load_jsonl(FIXTURE)
    backend = fake_backend()
    full = Checker(Settings(llm="local", judge_mode="rubric"), backend)  # the scores below
    again = Checker(Settings(llm="local", mitigate=False, judge=False), backend)
    outcomes = detection.run_detection(full, examples)
    report = rewrite_report(outcomes, examples, redetect(again, outcomes, examples))
    assert report["changed"] == 2 and report["mitigation_status"]["rewritten"] == 2
    assert report["zero_flags"] == {"raw": 0.5, "refined": 1.0, "refined_unverified": 0,
                                    "refined_empty": 0, "rewritten_clean": 1.0}
    assert report["judge"]["raw"]["mean"] == pytest.approx((5 + 3 + 5 + 1) / 4)
    assert report["judge"]["refined"]["mean"] == 5
    # s2's rewrite puts the source's first sentence where "It holds 90,000 books." was
    assert report["vs_reference"]["refined"]["n"] == 2


def test_conli_eval_detect_writes_results_and_reruns_from_cache(tmp_path: Path) -> None:
    argv = ["eval", "detect", "--file", str(FIXTURE), "--llm", "evalfake", "--cache-dir",
            str(tmp_path / "cache"), "--out", str(tmp_path / "run1"), "--judge"]
    CALLS.clear()
    assert main(argv) == 0
    first_calls = CALLS.count(2)
    assert first_calls > 0
    result = json.loads((tmp_path / "run1" / "results.json").read_text())
    meta = result["provenance"]
    assert meta["backend"] == "fake" and meta["model"] == "scripted"
    assert "nli_sentence.v3" in meta["templates"] and meta["machine"]["cpu_count"]
    assert meta["cache"]["misses"] == first_calls
    assert result["scores"]["datasets"]["eval_sample"]["response"]["f1_macro"] == 1.0
    assert "| eval_sample | 4 | 100.0 |" in (tmp_path / "run1" / "results.md").read_text()
    assert len((tmp_path / "run1" / "predictions.jsonl").read_text().splitlines()) == 4
    CALLS.clear()
    assert main([*argv[:-3], "--out", str(tmp_path / "run2"), "--judge"]) == 0
    assert CALLS.count(2) == 0  # a re-run costs nothing
    rerun = json.loads((tmp_path / "run2" / "results.json").read_text())
    # identical calls inside run 1 (s1 and s2 share a sentence) were already hits there
    total = meta["cache"]["hits"] + meta["cache"]["misses"]
    assert meta["cache"]["hits"] > 0
    assert rerun["provenance"]["cache"] == {"dir": str(tmp_path / "cache"), "hits": total,
                                            "misses": 0}
    assert rerun["scores"] == result["scores"]


def test_conli_eval_detect_resumes_in_budgeted_slices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["eval", "detect", "--file", str(FIXTURE), "--llm", "evalfake", "--no-cache",
            "--out", str(out)]
    CALLS.clear()
    assert main([*argv, "--budget-minutes", "0"]) == 0  # nothing starts: a partial run
    assert CALLS == []  # and no backend (no model load) was built to score it
    partial = json.loads((out / "results.json").read_text())
    assert partial["progress"] == {"done": 0, "planned": 4}
    assert partial["provenance"]["model"] == "none: no prediction made"
    assert "Partial run: 0 of 4" in (out / "results.md").read_text()
    assert main(argv) == 0
    log = out / "predictions.jsonl"
    lines = log.read_text().splitlines()
    assert len(lines) == 4
    # a crash tore the last line: that example alone runs again, the rest are read back
    log.write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])
    CALLS.clear()
    assert main(argv) == 0
    torn_id = json.loads(lines[3])["example_id"]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["example_id"] for r in rows) == ["s1", "s2", "s3", "s4"]
    assert rows[-1]["example_id"] == torn_id and 0 < CALLS.count(2) < 8
    done = json.loads((out / "results.json").read_text())
    assert done["progress"] == {"done": 4, "planned": 4}
    CALLS.clear()
    assert main(argv) == 0  # everything is done: re-scored without building a backend
    assert CALLS == []
    rescored = json.loads((out / "results.json").read_text())
    assert rescored["provenance"]["model"] == done["provenance"]["model"] == "scripted"
    assert rescored["scores"] == done["scores"]
    assert done["scores"]["datasets"]["eval_sample"]["response"]["f1_macro"] == 1.0
    assert main([*argv, "--ablation", "sentence"]) == 2  # another set-up: refused, not mixed
    assert "other settings" in capsys.readouterr().err
    # a run started before a setting existed resumes while that setting is at its default
    manifest = json.loads((out / "run.json").read_text())
    del manifest["settings"]["judge_scale"]
    (out / "run.json").write_text(json.dumps(manifest))
    assert main(argv) == 0
    manifest["settings"]["judge_raw"] = not manifest["settings"]["judge_raw"]
    (out / "run.json").write_text(json.dumps(manifest))
    assert main(argv) == 2  # one that was set otherwise is still another set-up


@pytest.mark.slow
def test_conli_eval_judge_and_rewrite_commands(tmp_path: Path) -> None:
    long_source = ("The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours. "
                   "The cafe is open in May. Tickets cost 5 euros.")
    data = tmp_path / "gold.jsonl"
    data.write_text(json.dumps({"source": long_source, "response": long_source, "label": 0})
                    + "\n" + json.dumps({"source": long_source, "response":
                                         "The pier opened in 1931.", "label": 1}) + "\n")
    common = ["--file", str(data), "--llm", "evalfake", "--cache-dir", str(tmp_path / "c")]
    assert main(["eval", "judge", *common, "--out", str(tmp_path / "j")]) == 0
    judged = json.loads((tmp_path / "j" / "results.json").read_text())
    for mode in ("rubric", "grounded"):  # one dataset: grounded uses the shipped scale
        assert judged["residuals"][mode]["gold_full"]["residual"] == 0
    assert (tmp_path / "j" / "progression.png").exists()
    assert judged["progress"] == {"documents_done": 1, "documents_planned": 1}
    assert main(["eval", "judge", *common, "--budget-minutes", "0", "--no-plot",
                 "--out", str(tmp_path / "j0")]) == 0  # nothing done: said, not hidden
    assert "partial: 0 of 1 documents" in (tmp_path / "j0" / "results.md").read_text()
    # a re-run of the same set-up takes its scored documents from the journal, not the model
    journal = (tmp_path / "j" / "scored.jsonl").read_text()
    assert journal.count("\n") == 1  # one record a document: never half a document
    assert len(json.loads(journal)["rows"]) == len(judged["scores"])
    assert main(["eval", "judge", *common[:-2], "--no-cache", "--no-plot",
                 "--out", str(tmp_path / "j")]) == 0
    assert (tmp_path / "j" / "scored.jsonl").read_text() == journal  # nothing scored again
    again = json.loads((tmp_path / "j" / "results.json").read_text())
    assert [r["score"] for r in again["scores"]] == [r["score"] for r in judged["scores"]]
    # another set-up in the same folder is refused rather than mixed in
    assert main(["eval", "judge", *common, "--seed", "1", "--out", str(tmp_path / "j")]) != 0
    assert main(["eval", "rewrite", *common, "--out", str(tmp_path / "r")]) == 0
    rewritten = json.loads((tmp_path / "r" / "results.json").read_text())
    assert rewritten["datasets"]["gold"]["zero_flags"]["refined"] == 1.0
    rows = [json.loads(line) for line in (tmp_path / "r" / "rewrites.jsonl").open()]
    assert len(rows) == rewritten["datasets"]["gold"]["n"]  # one row an example, to pair runs
    assert all(row["clean"] for row in rows)
    assert {row["rouge_l_vs_raw"] == 1.0 for row in rows} == {not row["changed"] for row in rows}


@pytest.mark.slow
def test_a_written_scale_records_the_fits_own_held_out_residual(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = ("The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours. "
              "The cafe is open in May. Tickets cost 5 euros.")
    files = []
    for name in ("north", "south"):  # two sets: each scored by a scale fitted on the other
        files += ["--file", str(tmp_path / f"{name}.jsonl")]
        (tmp_path / f"{name}.jsonl").write_text(
            json.dumps({"source": source, "response": source, "label": 0}) + "\n")
    flat = tmp_path / "flat.json"  # a hand-set scale that scores everything 1: easy to tell
    flat.write_text(json.dumps({"version": "flat", "x": [0.0, 1.0], "y": [1.0, 1.0]}))
    monkeypatch.setenv("CONLI_JUDGE_SCALE", str(flat))
    scale = tmp_path / "scale.json"
    assert main(["eval", "judge", *files, "--llm", "evalfake", "--cache-dir",
                 str(tmp_path / "c"), "--no-plot", "--write-scale", str(scale),
                 "--out", str(tmp_path / "j")]) == 0
    residuals = json.loads((tmp_path / "j" / "results.json").read_text())["residuals"]
    recorded = json.loads(scale.read_text())["training"]["leave_one_dataset_out"]
    assert recorded == residuals[je.FITTED_MODE]["all"]  # not the shipped scale's row
    assert recorded["residual"] < residuals["grounded"]["all"]["residual"]


def test_conli_eval_reports_a_bad_file_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "s"}\n')
    assert main(["eval", "detect", "--file", str(bad), "--llm", "evalfake", "--no-cache",
                 "--out", str(tmp_path / "o")]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
    assert main(["eval", "detect", "--file", str(bad), "--ablation", "entity", "--llm",
                 "evalfake", "--out", str(tmp_path / "o")]) == 2


def test_support_scores_give_an_auroc_and_missing_ones_are_left_out() -> None:
    def outcome(i: int, gold: bool, support: float | None) -> detection.Outcome:
        return detection.Outcome(f"e{i}", "d", gold, "supported", support_score=support)

    outcomes = [outcome(0, True, 0.1), outcome(1, True, 0.6), outcome(2, False, 0.4),
                outcome(3, False, 0.9), outcome(4, False, None)]
    auroc = detection.score_outcomes(outcomes)["datasets"]["d"]["response"]["auroc"]
    # pairs (hallucinated, grounded) ranked right: (0.1<0.4), (0.1<0.9), (0.6<0.9); wrong: 0.6>0.4
    assert auroc["not_entailed"] == {"value": 0.75, "n": 4}
    assert "judge_inverted" not in auroc  # no judge scores at all: no column of Nones


@pytest.mark.integration
def test_provenance_names_the_commit_the_run_started_from(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from conli.evaluation.report import git_state, provenance

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    git("init", "-q")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("commit", "-qm", "one")
    first = git("rev-parse", "HEAD").strip()
    monkeypatch.setattr("conli.evaluation.report.CODE_DIR", tmp_path)
    git_state.cache_clear()
    try:
        git_state()  # the run starts
        git("commit", "-qm", "two", "--allow-empty")  # a commit made while it runs
        meta = provenance(argv=[], backend="b", model="m", settings=Settings(), templates=[])
        assert meta["git_commit"] == first and meta["git_dirty"] is False
    finally:
        git_state.cache_clear()


@pytest.mark.integration
def test_provenance_names_the_checkout_conli_runs_from_not_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run started in another folder (or another checkout) records conli's own commit."""
    import subprocess

    from conli.evaluation.report import CODE_DIR, git_state

    here = subprocess.run(["git", "rev-parse", "HEAD"], cwd=CODE_DIR, capture_output=True,
                          text=True)
    if here.returncode:
        pytest.skip("conli is not running from a git checkout")
    monkeypatch.chdir(tmp_path)  # not a checkout: git asked here would fail
    git_state.cache_clear()
    try:
        assert git_state()[0] == here.stdout.strip()
    finally:
        git_state.cache_clear()


def test_judge_auroc_from_a_stored_run_names_the_rubric_template_only_when_it_ran(
        tmp_path: Path) -> None:
    common = ["--file", str(FIXTURE), "--llm", "evalfake", "--cache-dir", str(tmp_path / "c")]
    assert main(["eval", "detect", *common, "--out", str(tmp_path / "d")]) == 0
    stored = ["--predictions", str(tmp_path / "d" / "predictions.jsonl")]
    assert main(["eval", "judge-auroc", *common, *stored, "--per-dataset", "0",
                 "--out", str(tmp_path / "a0")]) == 0
    alone = json.loads((tmp_path / "a0" / "results.json").read_text())
    assert alone["provenance"]["templates"] == [] and alone["provenance"]["backend"] == "none"
    assert alone["pooled"]["grounded_all"]["n"] == len(load_jsonl(FIXTURE))
    assert main(["eval", "judge-auroc", *common, *stored, "--per-dataset", "2",
                 "--out", str(tmp_path / "a2")]) == 0
    sampled = json.loads((tmp_path / "a2" / "results.json").read_text())
    assert sampled["provenance"]["templates"] == ["judge_rubric.v2"]
    assert sampled["datasets"]["eval_sample"]["rubric_sample"]["n"] == 2
    # each sampled example's scores are kept, and the pooled row reads the samples of every set
    kept = sampled["datasets"]["eval_sample"]["sample"]
    assert [s["rubric"] is not None for s in kept] == [True, True]
    assert sampled["pooled"]["rubric_sample"]["n"] == 2
    assert sampled["pooled"]["grounded_sample"]["n"] == 2
    assert "rubric_sample" not in alone["pooled"]
    # --skip passes over the first examples of a set (a trained detector's), then samples
    assert main(["eval", "judge-auroc", *common, *stored, "--per-dataset", "1", "--skip", "1",
                 "--out", str(tmp_path / "s")]) == 0
    skipped = json.loads((tmp_path / "s" / "results.json").read_text())
    assert [s["id"] for s in skipped["datasets"]["eval_sample"]["sample"]] == [kept[1]["id"]]


def test_predictions_are_read_from_the_run_folder_or_the_file_and_a_torn_line_is_cut(
        tmp_path: Path) -> None:
    """One reader: a run's folder or its file; a new run's folder is empty, a wrong path is
    bad input, and a crash's torn last line is dropped (the record runs again)."""
    run = tmp_path / "run"
    run.mkdir()
    assert detection.read_predictions(run) == []
    outcome = detection.Outcome("x1", "toy", True, "hallucinated")
    (run / detection.PREDICTIONS).write_text(
        json.dumps(outcome.to_json()) + "\n" + '{"example_id": "x2", "data', encoding="utf-8")
    assert detection.read_predictions(run) == [outcome.to_json()]
    assert detection.read_predictions(run / detection.PREDICTIONS,
                                      detection.Outcome.from_json) == [outcome]
    with pytest.raises(InputError, match="neither a detect run's folder"):
        detection.read_predictions(tmp_path / "elsewhere.jsonl")


def test_a_script_publishes_its_results_and_prints_its_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An experiment's last step: results.json and results.md in a folder made for them, the
    table on stdout as written, exit status 0."""
    from conli.evaluation.report import publish

    out = tmp_path / "new" / "run"
    assert publish(out, {"n": 1, "name": "é"}, "| a |\n") == 0
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == {"n": 1, "name": "é"}
    assert (out / "results.md").read_text(encoding="utf-8") == "| a |\n"
    assert capsys.readouterr().out == "| a |\n"
