"""One side of a comparison: a stored run read as one value per example.

A *read* names what is taken from which file of a stored run: a detect run's verdicts
(``verdict``: the one ``metrics.flag``), its support scores, its recorded looks read
another way, its scores as a backend without log-probabilities would give them; a features
file's ``cot`` verdicts or a fused artifact's decisions on it; a rewrite run's qualities; a
judge run's scores. Every read gives, per example, its set, its gold label (True:
hallucinated) and a value the rule can score (a flag, a score that ranks, or a quality),
keyed so that two runs of the same examples pair up. Nothing here calls a model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from conli.errors import ConfigError, InputError
from conli.evaluation.detection import read_predictions
from conli.evaluation.metrics import flag
from conli.evaluation.rule import Metric, held_out

Key = tuple[Any, ...]  # the set first, then what names the example in it


@dataclass(frozen=True)
class Item:
    """One example of a side: its set, its gold label and the value read."""

    dataset: str
    gold: bool
    value: float


Items = dict[Key, Item]  # in the run's order


class Side(BaseModel):
    """Which stored run(s) and how to read them; ``sets`` and ``skip`` narrow it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str | list[str] = Field(description="a stored run's folder or file; with several, "
                                 "the first that holds an example gives it")
    read: str = Field("verdict", description="what is read: one of READS")
    artifact: str | None = Field(None, description="read artifact: the fused model file")
    sets: list[str] | None = Field(None, description="only these sets")
    skip: int = Field(0, ge=0, description="leave out the first N of each set (held out)")

    def runs(self) -> list[Path]:
        """The run paths, as given."""
        return [Path(r) for r in ([self.run] if isinstance(self.run, str) else self.run)]


# --- a detect run's predictions ------------------------------------------------------------

NLI = ("sentence_nli", "entity_nli")
LOOKS: dict[str, Callable[[list[bool]], bool]] = {  # whether each look passed -> it passes
    "greedy": lambda p: p[0],
    "vote": lambda p: 2 * sum(p) > len(p),
    "again-where-flagged": lambda p: p[0] or 2 * sum(p) > len(p),
    "again-where-passed": lambda p: p[0] and 2 * sum(p) > len(p),
}
SCORES: dict[str, Callable[[Mapping[str, Any]], float]] = {  # one judgement -> its support
    "logprobs": lambda j: float(_first_look(j)["score"]),
    "logprobs-mean": lambda j: float(j["score"]),
    "looks": lambda j: sum(look["verdict"] == "supported" for look in j["looks"])
    / len(j["looks"]),
    "verdict": lambda j: float(_first_look(j)["verdict"] == "supported"),
}


def _first_look(judgement: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first (greedy) look, the one a single-look check makes."""
    looks = judgement.get("looks") or [judgement]
    return looks[0]  # type: ignore[no-any-return]


def _verdict(record: Mapping[str, Any]) -> float | None:
    return flag(record["predicted"], bool(record["gold"]),
                errored=record.get("error") is not None)


def _support(record: Mapping[str, Any]) -> float | None:
    """1 - the response's support score; one without a score sits at 0.5."""
    score = record.get("support_score")
    return 1 - (float(score) if score is not None else 0.5)


def _looks(rule: Callable[[list[bool]], bool]) -> Callable[[Mapping[str, Any]], float | None]:
    """Flagged where any NLI judgement fails under ``rule``.

    A judgement without looks keeps its verdict; a record without a result is not read.
    """
    def read(record: Mapping[str, Any]) -> float | None:
        if not record.get("result"):
            return None
        passes = [rule([look["verdict"] == "supported" for look in j["looks"]])
                  if j.get("looks") else j["verdict"] == "supported"
                  for s in record["result"]["sentences"] for j in s.get("judgements", [])
                  if j["detector"] in NLI]
        return float(not all(passes))
    return read


def _score(method: Callable[[Mapping[str, Any]], float]
           ) -> Callable[[Mapping[str, Any]], float | None]:
    """1 - the lowest judgement score ``method`` gives over the checked sentences.

    A record with a judgement lacking its looks (or an error) is not read.
    """
    def read(record: Mapping[str, Any]) -> float | None:
        if record.get("error") or not record.get("result"):
            return None
        values = []
        for sentence in record["result"]["sentences"]:
            for judgement in sentence["judgements"] if sentence["checked"] else []:
                if not judgement.get("looks") or judgement.get("error"):
                    return None
                values.append(method(judgement))
        return 1 - min(values) if values else None
    return read


def _predictions(value: Callable[[Mapping[str, Any]], float | None]
                 ) -> Callable[[Path, Side], Items]:
    def read(run: Path, _side: Side) -> Items:
        return _items(((r["dataset"], r["example_id"]), r["dataset"], bool(r["gold"]), value(r))
                      for r in read_predictions(run))
    return read


# --- a features file, a rewrite run, a judge run --------------------------------------------


def _features(value: str) -> Callable[[Path, Side], Items]:
    def read(path: Path, side: Side) -> Items:
        from conli.training.data import ExampleRows, read_rows

        _, rows = read_rows(path)
        values: Callable[[ExampleRows], float] = (
            (lambda r: float(r.cot_flagged())) if value == "cot"
            else (lambda r: 1 - r.cot_support()) if value == "cot-support"
            else _artifact(side))
        return _items(((r.dataset, r.example_id), r.dataset, r.label, values(r)) for r in rows)
    return read


def _artifact(side: Side) -> Callable[[Any], float]:
    """A fused artifact's decision on a features row (1.0: flagged)."""
    from conli.signals.model import load_model
    from conli.training.train import response_score

    if not side.artifact:
        raise ConfigError("read = \"artifact\" needs artifact = the fused model file")
    model = load_model(Path(side.artifact))
    return lambda row: float(response_score(model, row) >= model.threshold)


REWRITE: dict[str, Callable[[Mapping[str, Any]], float]] = {
    "clean": lambda row: 1.0 if row["clean"] else 0.0,  # re-detects as supported, or emptied
    "judge": lambda row: (row["judge_refined"] - 1) / 4 if row["judge_refined"] else 0.0,
    "kept": lambda row: float(row["rouge_l_vs_raw"]),  # ROUGE-L of the rewrite to the raw text
}


def _rewrites(quality: Callable[[Mapping[str, Any]], float]) -> Callable[[Path, Side], Items]:
    def read(run: Path, _side: Side) -> Items:
        rows = [json.loads(line) for line in _text(run / "rewrites.jsonl").splitlines()
                if line.strip()]
        return _items(((r["dataset"], r["example_id"]), r["dataset"], bool(r["label"]),
                       quality(r)) for r in rows)
    return read


def _judge_sample(mode: str) -> Callable[[Path, Side], Items]:
    """6 - a ``conli eval judge-auroc`` run's score of each sampled example in ``mode``."""
    def read(run: Path, _side: Side) -> Items:
        stored = json.loads(_text(_results(run)))
        return _items(((name, row["id"]), name, bool(row["gold"]),
                       None if row[mode] is None else 6 - row[mode])
                      for name, found in stored["datasets"].items() for row in found["sample"])
    return read


def _judge_texts(mode: str) -> Callable[[Path, Side], Items]:
    """6 - a ``conli eval judge`` run's score of each text in ``mode``.

    Gold: the text holds a wrong sentence (its target is below 5).
    """
    def read(run: Path, _side: Side) -> Items:
        stored = json.loads(_text(_results(run)))
        return _items(((s["dataset"], s["item"], s["task"], str(s["pct"]), s["target"]),
                       s["dataset"], s["target"] < 5,
                       None if s["score"] is None else 6.0 - s["score"])
                      for s in stored["scores"] if s["mode"] == mode)
    return read


@dataclass(frozen=True)
class Read:
    """How a read takes its values, and the metric they are scored by unless told."""

    items: Callable[[Path, Side], Items]
    metric: Metric


READS: dict[str, Read] = {
    "verdict": Read(_predictions(_verdict), "bacc"),
    "support": Read(_predictions(_support), "auroc"),
    **{f"looks-{name}": Read(_predictions(_looks(rule)), "bacc") for name, rule in LOOKS.items()},
    **{f"score-{name}": Read(_predictions(_score(fn)), "auroc") for name, fn in SCORES.items()},
    "cot": Read(_features("cot"), "bacc"),
    "cot-support": Read(_features("cot-support"), "auroc"),
    "artifact": Read(_features("artifact"), "bacc"),
    **{f"rewrite-{name}": Read(_rewrites(fn), "mean") for name, fn in REWRITE.items()},
    "judge-grounded": Read(_judge_sample("grounded"), "auroc"),
    "judge-rubric": Read(_judge_sample("rubric"), "auroc"),
    "judge-shipped-scale": Read(_judge_texts("grounded"), "auroc"),
    "judge-fitted-scale": Read(
        _judge_texts("grounded, scale fitted leave-one-dataset-out"), "auroc"),
}


def read_side(side: Side) -> Items:
    """The side's examples, in the first run's order.

    Each run is read in turn (the first holding an example gives it), then the examples are
    narrowed to ``sets`` and past the first ``skip`` of each set.
    """
    if side.read not in READS:
        raise ConfigError(f"unknown read {side.read!r}; known: {', '.join(READS)}")
    items: Items = {}
    for run in side.runs():
        if not run.exists():
            raise ConfigError(f"{run}: no such stored run")
        for key, item in READS[side.read].items(run, side).items():
            items.setdefault(key, item)
    if side.sets is not None:
        items = {k: v for k, v in items.items() if v.dataset in side.sets}
    if side.skip:
        kept = held_out([_Keyed(k, item.dataset) for k, item in items.items()], side.skip)
        items = {k.key: items[k.key] for k in kept}
    return items


@dataclass(frozen=True)
class _Keyed:
    key: Key
    dataset: str


def _items(rows: Iterable[tuple[Key, str, bool, float | None]]) -> Items:
    """Items in order, those without a value left out; a later record of a key wins."""
    out: Items = {}
    for key, dataset, gold, value in rows:
        if value is not None:
            out[key] = Item(dataset, gold, float(value))
    return out


def _results(run: Path) -> Path:
    return run / "results.json" if run.is_dir() else run


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
