"""Can the embedded model label a claim without reasoning? Read the one-token label.

    python benchmarks/experiments/issue-06-embedded-model/label_token_probe.py DATASET LIMIT [SEED]

For a stratified sample, prefills the sentence-level NLI answer up to its label (as the
score-first mode does) and prints the label-token shares of entailment, contradiction and
neutral per example, then the AUROC of two readings for separating hallucinated responses:
P(entailment) (what score-first uses) and 1 - P(contradiction). Whole responses are the
hypothesis, so use single-sentence sets (factcc, halueval_qa, aggrefact_*).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from conli.agents.nli_prompts import nli_prompt
from conli.agents.scoring import TOP_ALTERNATIVES
from conli.backends import CompletionRequest, get_backend
from conli.config import Settings
from conli.evaluation.detection import stratified_sample
from conli.evaluation.loaders import load_dataset
from conli.evaluation.metrics import auroc
from conli.prompts import render

LABELS = ("entailment", "contradiction", "neutral")
PROMPT = nli_prompt("v1")  # the batch prompt this probe was written for, and its label opening


def shares(top: dict[str, float]) -> dict[str, float]:
    """Probability of each label among the first label token's alternatives, normalised."""
    mass = dict.fromkeys(LABELS, 0.0)
    for token, logprob in top.items():
        piece = token.strip().strip('"').lower()
        for label in LABELS:
            if len(piece) >= 2 and label.startswith(piece):
                mass[label] += math.exp(logprob)
    total = sum(mass.values()) or 1.0
    return {label: value / total for label, value in mass.items()}


def main(dataset: str, limit: int, seed: int = 0, data_dir: Path = Path("../shared/data")
         ) -> None:
    settings = Settings()
    backend = get_backend(settings.llm, settings)
    examples = stratified_sample(load_dataset(dataset, data_dir), limit, seed)
    gold, rows = [], []
    for example in examples:
        prompt = render(PROMPT.template("sentence"), source=example.source,
                        hypotheses=[example.response], cot=True)
        messages = [*prompt.messages, {"role": "assistant", "content": PROMPT.label_opening}]
        reply = backend.complete(CompletionRequest(messages, max_tokens=1,
                                                   top_logprobs=TOP_ALTERNATIVES))
        if not reply.logprobs:
            raise SystemExit(f"{backend.name} returned no log-probabilities: use a backend "
                             "whose capabilities have scores_labels")
        row = shares(reply.logprobs[0].top)
        gold.append(example.label)
        rows.append(row)
        print(json.dumps({"id": example.id, "hallucinated": example.label,
                          **{k: round(v, 3) for k, v in row.items()}}), flush=True)
    print(json.dumps({
        "dataset": dataset, "examples": len(rows), "seed": seed, "model": backend.model,
        "auroc_p_entailment": auroc(gold, [-r["entailment"] for r in rows]),
        "auroc_not_contradiction": auroc(gold, [r["contradiction"] for r in rows]),
    }))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="a single-sentence set, e.g. factcc")
    parser.add_argument("limit", type=int, help="examples, stratified by label")
    parser.add_argument("seed", type=int, nargs="?", default=0)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    main(args.dataset, args.limit, args.seed, args.data_dir)
