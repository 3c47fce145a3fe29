#!/usr/bin/env bash
# Reproduce docs/benchmarks.md with the embedded default model (slow on CPU).
# Runs made before the v3 NLI prompt became the embedded default pin CONLI_NLI_PROMPT=v1.
# Detection runs are resumable: each command continues where an earlier run into the same
# --out stopped, so BUDGET (minutes, default: no limit) lets the table grow slice by slice.
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=${BUDGET:+--budget-minutes $BUDGET}
COMMON=(--data-dir ../shared/data --limit 100 --seed 0 --progress)
# the default until issue 6's v3 prompt: entity re-checks only for entities the source
# does not state word for word, v1 NLI prompt
# shellcheck disable=SC2086
CONLI_NLI_PROMPT=v1 conli eval detect --dataset all "${COMMON[@]}" $BUDGET \
  --out benchmarks/results/detect-default
# the same with the one-claim v3 prompt (the default on the embedded model since issue 6)
# shellcheck disable=SC2086
CONLI_NLI_PROMPT=v3 conli eval detect --dataset all "${COMMON[@]}" $BUDGET \
  --out benchmarks/results/detect-default-v3
# the paper's pattern, every tagged entity re-checked (the same order: paired with the above)
# shellcheck disable=SC2086
CONLI_ENTITY_RECHECK=all CONLI_NLI_PROMPT=v1 conli eval detect --dataset all "${COMMON[@]}" \
  $BUDGET --out benchmarks/results/detect-hierarchical
# the paper's pattern with the v2 NLI prompt (no evidence quote)
# shellcheck disable=SC2086
CONLI_ENTITY_RECHECK=all CONLI_NLI_PROMPT=v2 conli eval detect --dataset all "${COMMON[@]}" \
  $BUDGET --out benchmarks/results/detect-hierarchical-v2
for ablation in sentence hierarchical-no-cot; do
  # shellcheck disable=SC2086
  CONLI_NLI_PROMPT=v1 conli eval detect --dataset halueval_summarization --dataset halueval_qa --dataset factcc \
    "${COMMON[@]}" --ablation "$ablation" $BUDGET --out "benchmarks/results/detect-$ablation"
done
for set in halueval_summarization halueval_qa; do
  conli eval rewrite --dataset "$set" "${COMMON[@]}" --hallucinated-only \
    --out "benchmarks/results/rewrite-$set"
done
# the judge (issue 19): 15 documents a set, 3-sentence texts, grounded against rubric
conli eval judge --dataset conli_summeval --dataset halueval_summarization --data-dir ../shared/data \
  --limit 15 --seed 0 --sentences 3 --modes grounded reasoning --reasoning-items 5 --progress \
  --out benchmarks/results/judge-30
conli eval judge-auroc --dataset all --data-dir ../shared/data \
  --predictions benchmarks/results/detect-default/predictions.jsonl --per-dataset 10 --progress \
  --out benchmarks/results/judge-auroc
# coverage (issue 20): seed 001's synthetic errors; the label-only run (its NLI column is
# degenerate on the embedded model, see docs/benchmarks.md), then the chain-of-thought one
CONLI_CHAIN_OF_THOUGHT=false conli eval coverage --dataset conli_summeval --data-dir ../shared/data \
  --limit 34 --seed 0 --progress --out benchmarks/results/coverage-34
conli eval coverage --dataset conli_summeval --data-dir ../shared/data \
  --limit 34 --seed 0 --progress --out benchmarks/results/coverage-34-cot
# the same with the hidden-state columns (NLI replayed from the call cache)
conli eval coverage --dataset conli_summeval --data-dir ../shared/data \
  --limit 34 --seed 0 --progress --out benchmarks/results/coverage-34-semantic
# faithful generation (issue 21): 30 HaluEval QA + 10 summarization sources, S = 2, K = 2,
# then FOD with S = 4 on the same summaries (greedy comes from the call cache)
CONLI_FOD_SAMPLES=2 CONLI_FOD_BEAMS=2 CONLI_GENERATE_MAX_SENTENCES=3 conli eval generate \
  --dataset halueval_summarization --data-dir ../shared/data --limit 10 --progress \
  --out benchmarks/results/generate-summ10-s2k2
CONLI_FOD_SAMPLES=2 CONLI_FOD_BEAMS=2 CONLI_GENERATE_MAX_SENTENCES=3 conli eval generate \
  --dataset halueval_qa --data-dir ../shared/data --limit 30 --budget-minutes 31 --progress \
  --out benchmarks/results/generate-qa30-s2k2
CONLI_FOD_SAMPLES=4 CONLI_FOD_BEAMS=2 CONLI_GENERATE_MAX_SENTENCES=3 conli eval generate \
  --dataset halueval_summarization --data-dir ../shared/data --limit 10 --methods greedy fod \
  --budget-minutes 9 --progress --out benchmarks/results/generate-summ10-s4k2
# B as it was before the entity gate (A always re-checks every entity)
CONLI_ENTITY_RECHECK=all CONLI_NLI_PROMPT=v1 conli bench --dataset halueval_summarization --limit 20 --seed 0 \
  --out benchmarks/results/speed-halueval_summarization-20
CONLI_ENTITY_RECHECK=all CONLI_NLI_PROMPT=v2 conli bench --dataset halueval_summarization --limit 20 --seed 0 \
  --out benchmarks/results/speed-halueval_summarization-20-v2
# B with the v1 prompt; bounds from A's own llama.cpp timings beside each B (since 9fd175c)
CONLI_NLI_PROMPT=v1 conli bench --dataset halueval_summarization --limit 20 --seed 0 \
  --out benchmarks/results/speed-halueval_summarization-20-pair-rates
# the default B (v3 prompt on the embedded model)
conli bench --dataset halueval_summarization --limit 20 --seed 0 \
  --out benchmarks/results/speed-halueval_summarization-20-v3
# peak memory of the README's demo (read "Maximum resident set size")
/usr/bin/time -v conli check --source examples/source.txt --response examples/response.txt \
  > /dev/null
# detection round 3 (issue 28): every dev example through fused with the v3 prompt, features
# recorded (resumable; the collection model is benchmarks/results/detect-fused-v3/collect-model.json)
CONLI_FUSED_MODEL=/work/runs/collect-fused.json conli eval detect --dataset all --limit 100 \
  --seed 0 --detector fused --progress --budget-minutes 50 --out /work/runs/detect-fused-collect
python benchmarks/experiments/issue-28-detector-training/train_detector.py export --predictions benchmarks/results/detect-fused-v3 \
  --out benchmarks/data/features/dev.jsonl
python benchmarks/experiments/issue-28-detector-training/train_detector.py fit --features benchmarks/data/features/dev.jsonl \
  --out benchmarks/results/detectors-lodo-v3
# which prompt's NLI outputs to train fused on (v1, as fused.v1 did, or the shipped v3)
python benchmarks/experiments/issue-28-detector-training/training_prompt.py --features benchmarks/data/features/dev.jsonl \
  --v1-predictions benchmarks/results/detect-default --out benchmarks/results/training-prompt
# fused.v1's recipe rebuilt from the repository as fused.v2 (a test checks it byte for byte)
python benchmarks/experiments/issue-28-detector-training/train_detector.py rebuild-fused --out benchmarks/results/fused-rebuild/fused.v2.json
python benchmarks/compare_artifacts.py --old src/conli/signals/fused.v1.json \
  --new benchmarks/results/fused-rebuild/fused.v2.json --features benchmarks/data/features/dev.jsonl
# where cot goes wrong: misses or false alarms, short or long sentences (no model call)
python benchmarks/experiments/issue-28-detector-training/cot_errors.py --predictions benchmarks/results/detect-fused-v3/predictions.jsonl
# conli calibrate's gain on each dev set: calibrated on one half, scored on the other
python benchmarks/experiments/issue-28-detector-training/calibration_gain.py --features benchmarks/data/features/dev.jsonl \
  --out benchmarks/results/calibration-gain
python benchmarks/experiments/issue-28-detector-training/calibration_gain.py --features benchmarks/data/features/dev.jsonl --only-gains \
  --out benchmarks/results/calibration-gain-only-gains
# evidence focus against cot, paired on the collection's examples (stopped by hand at 226)
CONLI_NLI_EVIDENCE=focus conli eval detect --dataset aggrefact_cnndm --dataset aggrefact_xsum \
  --dataset conli_qags_cnndm --dataset conli_qags_xsum --dataset conli_summeval --dataset factcc \
  --dataset halueval_summarization --limit 100 --seed 0 --detector cot --progress \
  --budget-minutes 70 --out benchmarks/results/detect-cot-focus-v3
python benchmarks/paired_gain.py --predictions benchmarks/results/detect-cot-focus-v3/predictions.jsonl \
  --features benchmarks/data/features/dev.jsonl --out benchmarks/results/paired-focus-v3
# several looks against cot, paired the same way (stopped by hand at 136)
CONLI_NLI_LOOKS=3 conli eval detect --dataset all --limit 100 --seed 0 --detector cot \
  --progress --budget-minutes 95 --out benchmarks/results/detect-cot-looks3-v3
python benchmarks/looks_gain.py --predictions benchmarks/results/detect-cot-looks3-v3/predictions.jsonl \
  --features benchmarks/data/features/dev.jsonl --out benchmarks/results/paired-looks3-v3
# cost of fused against cot on the README demo (detection only)
/usr/bin/time -v conli check --source examples/source.txt --response examples/response.txt \
  --no-mitigate --no-judge --detector cot > /dev/null
/usr/bin/time -v conli check --source examples/source.txt --response examples/response.txt \
  --no-mitigate --no-judge --detector fused > /dev/null
# the judge, round 2 (issue 29): the rubric pilot
conli eval judge --dataset conli_summeval --dataset halueval_summarization --limit 3 --seed 0 \
  --modes rubric --progress --out benchmarks/results/judge-pilot-v2
# the judge, round 3 (issue 29): n >= 60 in slices, both modes a document at a time; each
# slice goes on from the folder's journal, scored.jsonl (its first 14 documents seeded from
# the results.json of the run made before the journal existed)
conli eval judge --dataset conli_summeval --dataset halueval_summarization --limit 30 --seed 0 \
  --modes grounded rubric --budget-minutes 80 --progress --out benchmarks/results/judge-60
conli eval judge-auroc --dataset all --predictions benchmarks/results/detect-fused-v3/predictions.jsonl \
  --per-dataset 0 --out benchmarks/results/judge-auroc-grounded-v3
# the rubric judge alone on the same 60 documents (about 40 minutes on the AMD EPYC machine)
conli eval judge --dataset conli_summeval --dataset halueval_summarization --limit 30 --seed 0 \
  --modes rubric --progress --out benchmarks/results/judge-60-rubric
# both judges' AUROC on labelled examples: grounded from the stored fused verdicts (all 462),
# the rubric judge on the first 20 of each set (160 calls, about 14 minutes)
conli eval judge-auroc --dataset all --predictions benchmarks/results/detect-fused-v3/predictions.jsonl \
  --per-dataset 20 --progress --out benchmarks/results/judge-auroc-v3
# the judge, round 4 (issue 29): both modes on examples the shipped fused classifier never
# saw (it was trained on the first 37 of each set in this order); 426 rubric calls, 6-13 s each
conli eval judge-auroc --dataset conli_summeval --dataset aggrefact_cnndm \
  --predictions benchmarks/results/detect-fused-v3/predictions.jsonl --per-dataset 63 --skip 37 \
  --out benchmarks/results/judge-auroc-unseen-63-close
conli eval judge-auroc --dataset aggrefact_xsum --dataset conli_qags_cnndm \
  --dataset conli_qags_xsum --dataset factcc \
  --predictions benchmarks/results/detect-fused-v3/predictions.jsonl --per-dataset 63 --skip 37 \
  --progress --out benchmarks/results/judge-auroc-unseen-63
conli eval judge-auroc --dataset all --predictions benchmarks/results/detect-fused-v3/predictions.jsonl \
  --per-dataset 20 --skip 37 --progress --out benchmarks/results/judge-auroc-unseen
# prompt injection (issue 32): 22 planted errors carrying injections, each also run without it
python benchmarks/injection.py --controls --out benchmarks/results/injection
# the judge cases alone, with the controls' judge scores (recorded since b5d4540)
grep '"id": *"judge-' benchmarks/data/injection/cases.jsonl > judge-cases.jsonl
python benchmarks/injection.py --controls --cases judge-cases.jsonl --out benchmarks/results/injection-judge
# issue 51: the injection table with controls (36 cases, several sources), per detector and
# judge mode; then the shipped defences' accuracy from stored runs and data (no model call)
python benchmarks/injection.py --controls --out benchmarks/results/injection-round7
CONLI_DETECTORS='["cot"]' python benchmarks/injection.py --controls --out benchmarks/results/injection-round7-cot
CONLI_JUDGE_MODE=rubric python benchmarks/injection.py --controls --judge-only \
  --out benchmarks/results/injection-round7-rubric
CONLI_DETECTORS='["cot"]' CONLI_JUDGE_MODE=rubric python benchmarks/injection.py --controls \
  --judge-only --out benchmarks/results/injection-round7-cot-rubric
python benchmarks/experiments/issue-51-defences/evidence_rule.py --predictions benchmarks/results/detect-fused-v3/predictions.jsonl \
  --cot-run benchmarks/results/detect-cot-v3/predictions.jsonl --features benchmarks/data/features/dev.jsonl \
  --data-dir ../shared/data --out benchmarks/results/unstated-rule
python benchmarks/experiments/issue-51-defences/addressing_dev.py --out benchmarks/results/addressing-dev
# issue 56.2: the reading through the prompt cache, held out, then its speed
python benchmarks/experiments/issue-56-prompt-cache/reading_cache.py collect --out benchmarks/results/reading-cache --budget-minutes 105
python benchmarks/experiments/issue-56-prompt-cache/reading_cache.py decide --out benchmarks/results/reading-cache
python benchmarks/experiments/issue-56-prompt-cache/bench_reading.py --data-dir ../shared/data --out benchmarks/results/reading-speed
