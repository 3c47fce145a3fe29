"""Several looks: one claim judged by k chains of thought, their P(entailment) averaged.

A 1.5B model's single greedy chain is a coin with a bias: a second chain, sampled, often
reasons its way to the other label. With ``nli_looks = k`` the first look is the usual one
(``settings.temperature``, so it replays the single-look call), the other ``k - 1`` are
sampled at ``nli_look_temperature`` with seeds 1 to k - 1; the claim's score is the mean
P(entailment) and it passes only above one half (a tie is not a pass). A look that could
not complete leaves the claim ``unverified``: the vote is never taken on fewer looks.
"""

from __future__ import annotations

from conli.models import Judgement


def look_score(judgement: Judgement) -> float:
    """One look's P(entailment): its label-token score, else its verdict as 0 or 1.

    A look whose verdict is not a pass (an entailment quoting nothing) counts at most
    one half, whatever its label token said.
    """
    passed = judgement.verdict == "supported"
    if judgement.score is None:
        return 1.0 if passed else 0.0
    return judgement.score if passed else min(judgement.score, 0.5)


def combine_looks(looks: list[Judgement]) -> Judgement:
    """One judgement from every look at the same claim (the first look first).

    Shown reasoning, label and evidence are those of the first look that agrees with the
    vote; the score is the mean, and each look's score is kept in ``look_scores``.
    """
    if not looks:
        raise ValueError("no looks to combine")
    failed = [j for j in looks if j.verdict == "unverified"]
    if failed:
        return failed[0].model_copy(update={
            "error": f"{len(failed)} of {len(looks)} looks could not complete: {failed[0].error}",
        })
    scores = [look_score(j) for j in looks]
    mean = sum(scores) / len(scores)
    verdict = "supported" if mean > 0.5 else "hallucinated"
    shown = next((j for j in looks if j.verdict == verdict), looks[0])
    agree = sum(j.verdict == "supported" for j in looks)
    note = f"[{agree} of {len(looks)} looks found entailment; mean P(entailment) {mean:.2f}]"
    return shown.model_copy(update={
        "verdict": verdict,
        "score": mean,
        "look_scores": scores,
        "reasoning": f"{shown.reasoning} {note}".strip(),
    })
