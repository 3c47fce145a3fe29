#!/usr/bin/env bash
# Reproduce docs/benchmarks.md with the embedded default model (slow on CPU).
# Detection runs are resumable: each command continues where an earlier run into the same
# --out stopped, so BUDGET (minutes, default: no limit) lets the table grow slice by slice.
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=${BUDGET:+--budget-minutes $BUDGET}
COMMON=(--data-dir ../shared/data --limit 100 --seed 0 --progress)
# the default: entity re-checks only for entities the source does not state word for word
# shellcheck disable=SC2086
conli eval detect --dataset all "${COMMON[@]}" $BUDGET --out eval/results/detect-default
# the paper's pattern, every tagged entity re-checked (the same order: paired with the above)
# shellcheck disable=SC2086
CONLI_ENTITY_RECHECK=all conli eval detect --dataset all "${COMMON[@]}" $BUDGET \
  --out eval/results/detect-hierarchical
# the paper's pattern with the v2 NLI prompt (no evidence quote)
# shellcheck disable=SC2086
CONLI_ENTITY_RECHECK=all CONLI_NLI_PROMPT=v2 conli eval detect --dataset all "${COMMON[@]}" \
  $BUDGET --out eval/results/detect-hierarchical-v2
for ablation in sentence hierarchical-no-cot; do
  # shellcheck disable=SC2086
  conli eval detect --dataset halueval_summarization --dataset halueval_qa --dataset factcc \
    "${COMMON[@]}" --ablation "$ablation" $BUDGET --out "eval/results/detect-$ablation"
done
for set in halueval_summarization halueval_qa; do
  conli eval rewrite --dataset "$set" "${COMMON[@]}" --hallucinated-only \
    --out "eval/results/rewrite-$set"
done
conli eval judge --dataset conli_summeval --data-dir ../shared/data --limit 30 --seed 0 \
  --sentences 5 --progress --out eval/results/judge-summeval
# B as it was before the entity gate (A always re-checks every entity)
CONLI_ENTITY_RECHECK=all conli bench --dataset halueval_summarization --limit 20 --seed 0 \
  --out eval/results/speed-halueval_summarization-20
CONLI_ENTITY_RECHECK=all CONLI_NLI_PROMPT=v2 conli bench --dataset halueval_summarization --limit 20 --seed 0 \
  --out eval/results/speed-halueval_summarization-20-v2
# the default B; bounds from A's own llama.cpp timings beside each B (since 9fd175c)
conli bench --dataset halueval_summarization --limit 20 --seed 0 \
  --out eval/results/speed-halueval_summarization-20-pair-rates
# peak memory of the README's demo (read "Maximum resident set size")
/usr/bin/time -v conli check --source examples/source.txt --response examples/response.txt \
  > /dev/null
