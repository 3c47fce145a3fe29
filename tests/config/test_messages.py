"""Messages point somewhere real: every setting a message names exists (issue 32, item 8)."""

from __future__ import annotations

import ast
import re

import pytest

from conli.config import Settings
from conli.config.credentials import PROVIDER_VARIABLES
from conli.errors import InputError, InputTooLargeError
from conli.run.inputs import check_input, parse_points, validate_text
from tests.support.paths import ROOT

SRC = ROOT / "src" / "conli"
SETTING_VARIABLES = {f"CONLI_{name.upper()}" for name in Settings.model_fields}
# a dict setting's entries are set one by one as CONLI_<FIELD>__<KEY>[__<KEY>]
NESTED_SETTINGS = {f"CONLI_{name.upper()}" for name, field in Settings.model_fields.items()
                   if getattr(field.annotation, "__origin__", None) is dict}
NAMED = re.compile(r"CONLI_[A-Z0-9_]+")


def _named(message: str) -> set[str]:
    return set(NAMED.findall(message))


@pytest.mark.parametrize(("field", "setting"), [
    ("source", "CONLI_MAX_SOURCE_CHARS"),
    ("response", "CONLI_MAX_RESPONSE_CHARS"),
    ("question", "CONLI_MAX_SOURCE_CHARS"),  # a question is held to the source's limit
])
def test_a_text_over_its_limit_names_the_setting_that_raises_it(field: str, setting: str) -> None:
    texts = {"source": "The library opened in 1962.", "response": "It opened in 1962.",
             "question": "When?", field: "x" * 50}
    with pytest.raises(InputTooLargeError) as refused:
        check_input(texts["source"], texts["response"], question=texts["question"],
                    max_source_chars=40 if field != "response" else 1000,
                    max_response_chars=40 if field == "response" else 1000)
    assert _named(str(refused.value)) == {setting}
    assert setting in SETTING_VARIABLES


def test_points_over_their_fixed_limit_name_no_setting() -> None:
    with pytest.raises(InputTooLargeError) as refused:
        parse_points({"x" * 300: ["a point"]})
    assert _named(str(refused.value)) == set()  # was CONLI_MAX_POINTS PERSPECTIVE NAME_CHARS


def test_a_missing_text_says_it_is_missing() -> None:
    with pytest.raises(InputError, match="response is missing"):
        validate_text(None, name="response", max_chars=10)


def test_every_setting_the_product_names_exists() -> None:
    """Scan every string the product holds (messages, help, docstrings) for CONLI_ names.

    conli.config names two that are not settings on purpose: the misspelling its unknown-variable
    warning catches (CONLI_DETECTOR) and the test suite's own prefix it exempts.
    """
    unknown: dict[str, set[str]] = {}
    meant = {"config/__init__.py": {"CONLI_DETECTOR", "CONLI_TEST_"}}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                bad = {name for name in _named(node.value) - set(PROVIDER_VARIABLES)
                       if name.split("__")[0] not in SETTING_VARIABLES
                       or ("__" in name and name.split("__")[0] not in NESTED_SETTINGS)}
                bad -= meant.get(str(path.relative_to(SRC)), set())
                if bad:
                    unknown.setdefault(str(path.relative_to(SRC)), set()).update(bad)
    assert unknown == {}
