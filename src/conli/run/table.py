"""Many pairs as data: a DataFrame or an HF-style dataset in, a table of results out.

A pair is read by its field names, conli's own and its peers' (RAGAS' ``SingleTurnSample``,
DeepEval's ``LLMTestCase``), the first one a pair has (not null) in this order:

==========  ========================================================================
conli       read from
==========  ========================================================================
source      ``source``, ``retrieved_contexts`` (RAGAS), ``retrieval_context``, then
            ``context`` (DeepEval)
response    ``response`` (conli, RAGAS), ``actual_output`` (DeepEval)
question    ``question``, ``user_input`` (RAGAS), ``input`` (DeepEval)
points      ``points``
==========  ========================================================================

The peers' fields conli does not read (``IGNORED``: references, expected outputs, ids) may
be present. A pandas ``DataFrame`` (anything with ``columns`` and ``to_dict``) is read row by
row and its index kept for the results; an HF ``datasets.Dataset`` (``column_names``) row by
row; a table that lacks a source or a response column is refused at once, naming its
columns. Neither library is imported to read them; ``PairResults.to_pandas`` and
``to_dataset`` import theirs (the ``[data]`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from conli.errors import ConfigError, InputError, install_hint
from conli.models import PairResult

FIELDS: dict[str, tuple[str, ...]] = {
    "source": ("source", "retrieved_contexts", "retrieval_context", "context"),
    "response": ("response", "actual_output"),
    "question": ("question", "user_input", "input"),
    "points": ("points",),
}
READ = frozenset(name for names in FIELDS.values() for name in names)
# peers' fields conli does not read, which a pair may carry
IGNORED = frozenset({"id", "reference", "reference_contexts", "expected_output",
                     "multi_responses", "rubrics", "name", "tags", "additional_metadata",
                     "comments", "expected_tools", "tools_called"})


def is_table(data: object) -> bool:
    """A pandas DataFrame or an HF-style dataset (read by columns), not a list of pairs."""
    return (hasattr(data, "columns") and hasattr(data, "to_dict")) or hasattr(
        data, "column_names")


def table_rows(data: Any) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """A table's rows as mappings, and its index labels (a DataFrame's; None otherwise).

    ``InputError`` at once, naming the columns, when no column holds a source or a response.
    """
    columns = [str(c) for c in (data.columns if hasattr(data, "columns")
                                else data.column_names)]
    for field, names in FIELDS.items():
        if field in ("source", "response") and not set(names) & set(columns):
            raise InputError(f"the table has no {field} column (its columns: {columns}); "
                             f"name one {' or '.join(names)}")
    if hasattr(data, "to_dict") and hasattr(data, "index"):
        return data.to_dict("records"), list(data.index)
    return [dict(row) for row in data], None


def missing(value: object) -> bool:
    """None, a float NaN or pandas' NA/NaT: a table's empty cell."""
    return value is None or (isinstance(value, float) and value != value) or type(
        value).__name__ in ("NAType", "NaTType")


def _plain(value: object) -> object:
    """A numpy array (a list column read by pandas) as a list; anything else as it is."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) and not isinstance(value, str) else value


def as_mapping(pair: object) -> Mapping[str, Any] | None:
    """A pair's fields as a mapping; None for what is not a pair.

    A pair is a mapping, a pydantic model (a RAGAS sample) or an object with the fields'
    attributes (a DeepEval test case).
    """
    if isinstance(pair, Mapping):
        return pair
    dump = getattr(pair, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, Mapping) else None
    found = {name: getattr(pair, name) for name in READ if hasattr(pair, name)}
    return found if "response" in found or "actual_output" in found else None


def fields_of(pair: Mapping[str, Any], index: int, *, strict: bool = True) -> dict[str, Any]:
    """A pair's fields as ``Checker.check`` takes them, read by ``FIELDS``' names.

    ``strict``: a key that is neither read nor a known peer field is refused (a typo such as
    ``reponse`` is an error, not an ignored field); a table's extra columns are not.
    """
    if strict:
        unknown = sorted(str(k) for k in pair if k not in READ and k not in IGNORED)
        if unknown:
            raise InputError(f"pair {index}: unknown keys {unknown}; a pair maps source and "
                             "response (and optionally question and points), or RAGAS' or "
                             "DeepEval's names for them")
    fields: dict[str, Any] = {}
    for field, names in FIELDS.items():
        given = next((pair[name] for name in names if not missing(pair.get(name))), None)
        if given is not None:
            fields[field] = _plain(given) if field == "source" else given
    absent = [field for field in ("source", "response") if field not in fields]
    if absent:
        raise InputError(f"pair {index}: no {' and no '.join(absent)} (read from "
                         f"{', '.join(FIELDS[absent[0]])})")
    return fields


def canonical(record: dict[str, Any]) -> dict[str, Any]:
    """A batch record with its peers' names read as conli's (``source`` first); others kept."""
    out = dict(record)
    for field, names in FIELDS.items():
        if field not in out:
            name = next((n for n in names if not missing(record.get(n))), None)
            if name is not None:
                out[field] = record[name]
    return out


class PairResults(list[PairResult]):
    """``check_many``'s results, in input order, with the input table's index labels.

    ``to_pandas()`` and ``to_dataset()`` give one flat row per pair (``to_records``), indexed
    like the input DataFrame, so ``df.join(results.to_pandas())`` lines them up.
    """

    def __init__(self, results: Iterable[PairResult] = (), labels: list[Any] | None = None):
        super().__init__(results)
        self.labels = labels

    def to_records(self) -> list[dict[str, Any]]:
        """One flat row a pair, for a table.

        Its verdict, score, passed, supported_share, flagged sentences, the refined text,
        and the error's type and message for a pair that failed.
        """
        return [_record(result) for result in self]

    def to_pandas(self) -> Any:
        """The results as a pandas ``DataFrame`` (the ``[data]`` extra)."""
        pandas = _need("pandas")
        return pandas.DataFrame(self.to_records(), index=self.labels)

    def to_dataset(self) -> Any:
        """The results as an HF ``datasets.Dataset`` (the ``[data]`` extra)."""
        return _need("datasets").Dataset.from_list(self.to_records())


def _record(pair: PairResult) -> dict[str, Any]:
    result = pair.result
    return {
        "verdict": pair.verdict, "score": pair.score, "passed": pair.passed,
        "supported_share": None if result is None else result.supported_share,
        "flagged": [] if result is None else [
            s.text for s in result.sentences if s.verdict == "hallucinated"],
        "refined_text": None if result is None else result.refined_text,
        "error_type": None if pair.error is None else pair.error.type,
        "error": None if pair.error is None else pair.error.message,
    }


def _need(module: str) -> Any:
    """Import ``module`` (pandas, datasets, pyarrow) or say which extra brings it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"this needs {module}: {install_hint('data')} ({exc})") from exc
