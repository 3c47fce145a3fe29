#!/usr/bin/env bash
# Reproduce docs/benchmarks.md with the embedded default model (slow on CPU; cached).
set -euo pipefail
cd "$(dirname "$0")/.."
COMMON=(--data-dir ../shared/data --limit 100 --seed 0 --progress)
SETS=(conli_qags_cnndm conli_qags_xsum conli_summeval halueval_qa halueval_summarization
      aggrefact_cnndm aggrefact_xsum factcc)
for set in "${SETS[@]}"; do
  conli eval detect --dataset "$set" "${COMMON[@]}" --judge --out "eval/results/detect-$set"
done
for ablation in sentence hierarchical-no-cot; do
  for set in halueval_summarization halueval_qa factcc; do
    conli eval detect --dataset "$set" "${COMMON[@]}" --ablation "$ablation" \
      --out "eval/results/ablation-$ablation-$set"
  done
done
for set in halueval_summarization halueval_qa; do
  conli eval rewrite --dataset "$set" "${COMMON[@]}" --hallucinated-only \
    --out "eval/results/rewrite-$set"
done
conli eval judge --dataset conli_summeval --data-dir ../shared/data --limit 30 --seed 0 \
  --sentences 5 --progress --out eval/results/judge-summeval
