"""Replay stored model calls through today's pipeline: the verdicts must not move.

``fixtures/replay/cache`` holds the embedded model's answers to every call the pipeline
made on eight dev examples (one per set), recorded before the detector refactor, and
``before.json`` the verdicts it reached then. A backend that answers only from that cache
(and fails any other call) must reproduce them exactly: a refactor that changed a prompt,
a call or a verdict fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.backends.base import Capabilities, Completion, CompletionRequest
from conli.backends.cache import CachedBackend
from conli.config import Settings
from conli.evaluation.loaders import load_dataset
from conli.pipeline import Checker
from tests.support.paths import ROOT, TESTS

FIXTURES = TESTS / "fixtures" / "replay"
DATA = ROOT.parent / "shared" / "data"


class Recorded:
    """The embedded backend's identity and capabilities; a call not in the cache fails."""

    name = "local"
    model = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    capabilities = Capabilities(context_window=8192, max_concurrency=1, judges_batches=False,
                                continues_assistant=True, logprobs=20, counts_tokens=True)

    def complete(self, request: CompletionRequest) -> Completion:
        raise AssertionError("a call the recorded run did not make")

    def count_tokens(self, text: str) -> int:
        return len(text) // 3  # every dev source here fits the context either way

    def close(self) -> None:
        pass


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside the project")
def test_recorded_calls_reach_the_recorded_verdicts(tmp_path: Path) -> None:
    expected = json.loads((FIXTURES / "before.json").read_text())
    examples = {(e.dataset, e.id): e for name in {x["dataset"] for x in expected}
                for e in load_dataset(name, DATA)}
    backend = CachedBackend(Recorded(), FIXTURES / "cache")
    checker = Checker(Settings(mitigate=False, judge=False, cache_dir=tmp_path),
                      backend=backend)
    for row in expected:
        example = examples[(row["dataset"], row["id"])]
        result = checker.check(example.source, example.response)
        assert result.verdict == row["predicted"], row["id"]
        assert [[s.text, s.verdict, s.score] for s in result.sentences] == [  # 4 places now
            [text, verdict, None if score is None else round(score, 4)]
            for text, verdict, score in row["sentences"]]
        assert result.support_score == (None if row["support_score"] is None
                                        else round(row["support_score"], 4))
    assert backend.misses == 0 and backend.hits > 0
