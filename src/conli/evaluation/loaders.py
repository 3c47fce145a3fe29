"""Read every evaluation format into one ``Example`` type (``conli.training.example``).

Formats: the CoNLI TSV suites (``<task>_raw_response.tsv`` + ``src/<DataID>.txt``), HaluEval
QA and summarization JSONL (one record gives a grounded and a hallucinated example),
AggreFact/SummaC-style JSON, FactCC JSON, and a plain JSONL format for users' own data::

    {"id": "a1", "source": "...", "response": "...", "label": true, "question": "...",
     "sentences": [{"text": "...", "hallucinated": false}, ...], "reference": "..."}

``label`` is true (or 1, or "hallucinated") when the response is hallucinated; ``id``,
``question``, ``sentences`` and ``reference`` are optional. Errors name the file and line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from conli.errors import InputError
from conli.training.example import Example as Example  # the type every loader returns
from conli.training.marks import (
    Disagreement,
    agreement,
    check_mark,
    is_sign_off,
    reviewer_of,
    second_mark,
)


class DataFormatError(InputError):
    """An evaluation file does not have the shape its format promises."""


# --- CoNLI TSV suites --------------------------------------------------------------------


def load_conli_suite(task_dir: Path, dataset: str | None = None) -> list[Example]:
    """Load a CoNLI suite folder: group TSV rows by DataID into responses, keep row labels.

    A response is hallucinated if any of its rows is (``IsHallucination``); rows become the
    gold sentences. The shipped suites have one row per response, so their labels are
    response level.
    """
    task_dir = Path(task_dir)
    tables = sorted(task_dir.glob("*_raw_response.tsv"))
    if len(tables) != 1:
        raise DataFormatError(f"{task_dir}: expected one *_raw_response.tsv, found {len(tables)}")
    name = dataset or f"conli_{task_dir.name}"
    rows: dict[str, list[tuple[int, str, bool, float | None]]] = {}
    with tables[0].open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for line, row in enumerate(reader, start=2):
            try:
                data_id = row["DataID"].strip()
                entry = (
                    int(row["SentenceID"]),
                    row["Sentence"].strip(),
                    _binary(row["IsHallucination"]),
                    float(row["Consistency"]) if row.get("Consistency") else None,
                )
            except (KeyError, ValueError, AttributeError) as exc:
                raise DataFormatError(f"{tables[0]}:{line}: bad row: {exc}") from exc
            rows.setdefault(data_id, []).append(entry)
    examples = []
    for data_id, entries in rows.items():
        entries.sort(key=lambda e: e[0])
        source_path = task_dir / "src" / f"{data_id}.txt"
        try:
            source = source_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DataFormatError(f"{source_path}: missing source for DataID {data_id}") from exc
        sentences = tuple((text, hallucinated) for _, text, hallucinated, _ in entries)
        examples.append(
            Example(
                id=f"{name}:{data_id}",
                source=source,
                response=" ".join(text for text, _ in sentences),
                label=any(h for _, h in sentences),
                dataset=name,
                sentence_labels=sentences if len(sentences) > 1 else None,
                meta={"consistency": [c for *_, c in entries]},
            )
        )
    return examples


# --- HaluEval ----------------------------------------------------------------------------


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(
                    f"{path}:{number}: not UTF-8 (byte {exc.start} of the line: "
                    f"{raw[exc.start:exc.start + 1]!r}); convert it, e.g. iconv -f latin1 "
                    "-t utf-8") from exc
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(f"{path}:{number}: not JSON: {exc.msg}") from exc
            if not isinstance(record, dict):
                raise DataFormatError(f"{path}:{number}: expected a JSON object")
            yield number, record


def _field(record: dict[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise DataFormatError(f"{where}: field {key!r} missing or not a string")
    return value


def _halueval(
    path: Path, dataset: str, source_key: str, right_key: str, wrong_key: str
) -> list[Example]:
    examples = []
    for number, record in _jsonl(path):
        where = f"{path}:{number}"
        source = _field(record, source_key, where)
        right = _field(record, right_key, where)
        wrong = _field(record, wrong_key, where)
        question = record.get("question") if isinstance(record.get("question"), str) else None
        index = number - 1
        examples.append(Example(f"{dataset}:{index}:grounded", source, right, False, dataset,
                                reference=right, question=question))
        examples.append(Example(f"{dataset}:{index}:hallucinated", source, wrong, True, dataset,
                                reference=right, question=question))
    return examples


def load_halueval_qa(path: Path, dataset: str = "halueval_qa") -> list[Example]:
    """Load HaluEval QA: the source is ``knowledge``; the answer is read with its question."""
    return _halueval(path, dataset, "knowledge", "right_answer", "hallucinated_answer")


def load_halueval_summarization(
    path: Path, dataset: str = "halueval_summarization"
) -> list[Example]:
    """Load HaluEval summarization: the document with its right and hallucinated summaries."""
    return _halueval(path, dataset, "document", "right_summary", "hallucinated_summary")


# --- AggreFact / SummaC / FactCC JSON ----------------------------------------------------


def load_claims_json(path: Path, dataset: str) -> list[Example]:
    """Load a JSON list of {document, claim, label}, label 1 = consistent (AggreFact, FactCC)."""
    path = Path(path)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path}: not JSON: {exc.msg}") from exc
    if not isinstance(records, list):
        raise DataFormatError(f"{path}: expected a JSON list of records")
    examples = []
    for index, record in enumerate(records):
        where = f"{path}[{index}]"
        if not isinstance(record, dict):
            raise DataFormatError(f"{where}: expected an object")
        try:
            consistent = _binary(record.get("label"))
        except ValueError as exc:
            raise DataFormatError(f"{where}: {exc}") from exc
        meta = {k: record[k] for k in ("cut", "origin", "model_name", "bbcid") if k in record}
        examples.append(
            Example(f"{dataset}:{index}", _field(record, "document", where),
                    _field(record, "claim", where), not consistent, dataset, meta=meta)
        )
    return examples


# --- users' own JSONL --------------------------------------------------------------------


def load_jsonl(path: Path, dataset: str | None = None, *,
               disagreements: list[Disagreement] | None = None) -> list[Example]:
    """Load the plain format in the module docstring; ``label`` true means hallucinated.

    Each row is held to its own fields: an id is a string or an integer and names one row
    only, and a row the report's marks wrote (``verdict`` and ``mark``) has the label they
    mean (``training.marks.check_mark``), so an edited file cannot turn a calibration
    silently. Marks of one id by several named reviewers (four eyes) are one example with
    the label they agree on; where they disagree, the example is left out and appended to
    ``disagreements``. A reviewer's sign-off line is no example.
    """
    path = Path(path)
    name = dataset or path.stem
    examples: list[Example] = []
    first: dict[str, tuple[int, dict[str, Any], bool]] = {}  # id -> its first line, row, label
    labels: dict[str, dict[str, bool]] = {}  # an id several reviewers marked: who said what
    for number, record in _jsonl(path):
        where = f"{path}:{number}"
        if is_sign_off(record):
            continue
        try:
            label = _label(record.get("label"))
            sentences = _sentences(record.get("sentences"))
            check_mark(record, label)
            row_id = _row_id(record.get("id", f"{name}:{number - 1}"))
        except ValueError as exc:
            raise DataFormatError(f"{where}: {exc}") from exc
        if sentences and label != any(h for _, h in sentences):
            raise DataFormatError(f"{where}: label disagrees with the sentence labels")
        if row_id in first:
            line, earlier, earlier_label = first[row_id]
            said = labels.setdefault(row_id, {str(reviewer_of(earlier)): earlier_label})
            why = second_mark(earlier, record, set(said))
            if why is not None:
                raise DataFormatError(f"{where}: id {row_id!r} is already the id of line "
                                      f"{line}; {why}")
            said[str(reviewer_of(record))] = label
            continue
        first[row_id] = (number, record, label)
        reference = record.get("reference")
        question = record.get("question")
        examples.append(
            Example(
                id=row_id,
                source=_field(record, "source", where),
                response=_field(record, "response", where),
                label=label,
                dataset=name,
                sentence_labels=sentences,
                reference=reference if isinstance(reference, str) else None,
                question=question if isinstance(question, str) else None,
            )
        )
    split = [Disagreement(key, said) for key, said in labels.items() if not agreement(said)]
    if disagreements is not None:
        disagreements += split
    left_out = {d.id for d in split}
    return [e for e in examples if e.id not in left_out]


def _row_id(value: Any) -> str:
    """An example's id: a string, or an integer written as one; anything else is an error."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    raise ValueError(f"id must be a string, got {type(value).__name__}")


def _binary(value: Any) -> bool:
    """1/0 as int, float or string (``"1"``, ``"1.0"``) to a bool; anything else is an error."""
    if isinstance(value, bool):
        return value
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ValueError(f"label must be 0 or 1, got {value!r}") from None
    if number not in (0.0, 1.0):
        raise ValueError(f"label must be 0 or 1, got {value!r}")
    return number == 1.0


def _label(value: Any) -> bool:
    """Parse a hallucination label: true/false, 1/0 or the words hallucinated/supported."""
    if isinstance(value, str) and value.strip().lower() in ("hallucinated", "supported"):
        return value.strip().lower() == "hallucinated"
    if value is None:
        raise ValueError("field 'label' is missing")
    return _binary(value)


def _sentences(value: Any) -> tuple[tuple[str, bool], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError("'sentences' must be a non-empty list")
    out = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ValueError("each sentence needs 'text' and 'hallucinated'")
        out.append((item["text"], _label(item.get("hallucinated"))))
    return tuple(out)


# --- the shared data folder --------------------------------------------------------------

Loader = Callable[[Path], list[Example]]

DATASETS: dict[str, tuple[str, Loader]] = {
    "conli_qags_cnndm": ("conli_suites/qags_cnndm", load_conli_suite),
    "conli_qags_xsum": ("conli_suites/qags_xsum", load_conli_suite),
    "conli_summeval": ("conli_suites/summeval", load_conli_suite),
    "halueval_qa": ("halueval/qa_dev_1000.jsonl", load_halueval_qa),
    "halueval_summarization": ("halueval/summarization_dev_500.jsonl",
                               load_halueval_summarization),
    "aggrefact_cnndm": ("aggrefact_cnndm_sota_val.json",
                        lambda p: load_claims_json(p, "aggrefact_cnndm")),
    "aggrefact_xsum": ("aggrefact_xsum_sota_val.json",
                       lambda p: load_claims_json(p, "aggrefact_xsum")),
    "factcc": ("factcc_val_931.json", lambda p: load_claims_json(p, "factcc")),
}

FORMATS: dict[str, Callable[[Path, str], list[Example]]] = {
    "jsonl": load_jsonl,
    "conli_tsv": load_conli_suite,
    "halueval_qa": load_halueval_qa,
    "halueval_summarization": load_halueval_summarization,
    "claims_json": load_claims_json,
}


def dataset_path(name: str, data_dir: Path) -> Path:
    """Where a named dataset lives under ``data_dir``."""
    if name not in DATASETS:
        raise DataFormatError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return Path(data_dir) / DATASETS[name][0]


def load_dataset(name: str, data_dir: Path) -> list[Example]:
    """Load a named dataset from the shared data folder (see ``DATASETS``)."""
    path = dataset_path(name, data_dir)
    if not path.exists():
        raise DataFormatError(f"dataset {name!r} not found at {path}")
    return DATASETS[name][1](path)


def load_file(path: Path, fmt: str = "jsonl", dataset: str | None = None, *,
              disagreements: list[Disagreement] | None = None) -> list[Example]:
    """Load one file (or suite folder) in a named format (see ``FORMATS``).

    ``disagreements`` collects the examples reviewers' marks disagree on (``load_jsonl``).
    """
    if fmt not in FORMATS:
        raise DataFormatError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    try:
        if fmt == "jsonl":
            return load_jsonl(Path(path), dataset or Path(path).stem,
                              disagreements=disagreements)
        return FORMATS[fmt](Path(path), dataset or Path(path).stem)
    except UnicodeDecodeError as exc:  # the JSONL reader names the line; the others the file
        raise DataFormatError(f"{path}: not UTF-8 (byte {exc.start}: "
                              f"{exc.object[exc.start:exc.start + 1]!r})") from exc
