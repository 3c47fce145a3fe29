"""The reference tables in the docs are the code's, so they cannot drift (issue 30).

docs/results.md's result-object table names every field of ``CheckResult`` in its first
column, and each row names, in backticks, every field of the models under it (two levels
down; a model that has a row of its own is documented there). docs/settings.md is generated
from ``conli.config`` (by ``conli.settings_doc``), and docs/configuration.md's short settings
table names only settings that exist. The pages themselves (README.md, the front page, and
docs/*.md): tests/house/test_docs_pages.py.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel

from conli.config import Settings
from conli.models import CheckResult, SentenceResult
from conli.settings_doc import SETTING_GROUPS, settings_reference
from tests.support.paths import ROOT

TICKED = re.compile(r"`([^`]+)`")


def _result_table() -> dict[str, str]:
    """Each field named in the table's first column, with the whole row it is named in."""
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    section = page.split("\n## The result object (`--json`)\n", 1)[1].split("\n#", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split(" | ", 1)[0]
            for name in TICKED.findall(first):
                rows[name.removesuffix("[]")] = line
    return rows


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds (``list[X] | None`` -> X)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, dict):
        return [m for arg in typing.get_args(annotation) for m in _models(arg)]
    return []


def _nested(model: type[BaseModel], depth: int) -> list[type[BaseModel]]:
    found = [model]
    if depth:
        for field in model.model_fields.values():
            for inner in _models(field.annotation):
                found += [m for m in _nested(inner, depth - 1) if m not in found]
    return found


def test_the_result_table_has_a_row_for_every_field() -> None:
    rows = _result_table()
    assert sorted(set(CheckResult.model_fields) - set(rows)) == []
    assert sorted(set(rows) - set(CheckResult.model_fields)) == []  # none that is gone


def test_each_row_names_the_fields_under_it() -> None:
    rows = _result_table()
    own_row = {m for name, field in CheckResult.model_fields.items()
               for m in _models(field.annotation) if name in rows}
    missing = {}
    for name, field in CheckResult.model_fields.items():
        ticked = {t.removesuffix("[]") for t in TICKED.findall(rows[name])}
        for top in _models(field.annotation):
            for model in _nested(top, 2):
                if model in own_row and model is not top:
                    continue  # documented in its own row
                gone = [f for f in model.model_fields if f not in ticked]
                if gone:
                    missing[f"{name}: {model.__name__}"] = gone
    assert missing == {}


def test_the_sentences_row_names_every_sentence_field() -> None:
    ticked = {t.removesuffix("[]") for t in TICKED.findall(_result_table()["sentences"])}
    assert set(SentenceResult.model_fields) <= ticked


def test_docs_settings_md_is_the_generated_reference() -> None:
    written = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert written == settings_reference(), (
        "docs/settings.md differs from conli.config: regenerate it with `make settings-doc`")


def test_every_setting_is_in_one_group_and_described() -> None:
    grouped = [name for group in SETTING_GROUPS for name in group.model_fields]
    assert sorted(grouped) == sorted(Settings.model_fields)  # each once, none left out
    assert [n for n, f in Settings.model_fields.items() if not f.description] == []


def test_the_reference_shows_machine_defaults_as_words() -> None:
    reference = settings_reference()
    assert "| `CONLI_LOCAL_THREADS` | the CPU count |" in reference
    assert "| `CONLI_CACHE_DIR` | `$XDG_CACHE_HOME/conli`, else `~/.cache/conli` |" in reference
    assert '| `CONLI_DETECTORS` | `["auto"]` |' in reference
    assert "| `CONLI_LOCAL_MODEL` | unset |" in reference
    assert "(one of `spacy`, `azure`)" in reference


def test_the_short_settings_table_names_real_settings_and_links_them_all() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    assert "](settings.md)" in section
    named = re.findall(r"`CONLI_([A-Z_]+)`", section)
    assert len(set(named)) >= 10
    assert sorted({n.lower() for n in named} - set(Settings.model_fields)) == []
