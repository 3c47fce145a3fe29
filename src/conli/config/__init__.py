"""All settings in one place, read from ``CONLI_*`` environment variables or passed in.

``Settings`` is one flat object (one environment variable per field, ``Settings(judge=False)``
in Python), assembled from one group per audience. A module types its parameter as the
group it needs (a backend takes ``BackendSettings``), so it sees only its own part.
Provider credentials are never settings: ``conli.config.credentials`` reads them, there only.
Nothing reads the environment at import time.
"""

from __future__ import annotations

import difflib
import os
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from conli.config.operators import BatchSettings as BatchSettings  # the operators' groups,
from conli.config.operators import ProxySettings as ProxySettings  # re-exported: conli.config
from conli.config.operators import ServiceSettings as ServiceSettings  # names every group
from conli.config.operators import TelemetrySettings as TelemetrySettings
from conli.errors import UnknownSettingWarning

# The CoNLI paper's Azure Text Analytics categories (its Appendix B selection).
PAPER_ENTITY_CATEGORIES: tuple[str, ...] = ("Person", "PersonType", "Location", "Event", "Skill",
                                             "DateTime", "Quantity")

# The languages conli reads, by ISO 639-1 code (``conli.text.language`` says what each gets):
# those pySBD splits and spaCy has stop words for, and Chinese and Japanese.
Language = Literal["en", "de", "fr", "es", "it", "nl", "da", "pl", "ru", "bg", "el", "sk",
                   "hy", "ar", "fa", "ur", "hi", "mr", "am", "zh", "ja"]
LanguageSetting = Literal["auto", Language]  # Python flattens it: "auto" or one of the codes


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "conli"


class BackendSettings(BaseModel):
    """Which model answers, and how its calls are made and bounded."""

    llm: str = Field(default="local", description="backend spec, e.g. local, openai:gpt-4o-mini")
    local_model: Path | None = Field(
        default=None, description="GGUF to run instead of the bundled one")
    local_context: int = Field(
        default=8192, ge=512, description="context window of the embedded model")
    local_threads: int = Field(
        default_factory=lambda: os.cpu_count() or 2, ge=1, description="CPU threads for llama.cpp"
    )
    local_prompt_cache: bool = Field(
        default=True, description="reuse llama.cpp's KV cache across calls (off only to benchmark)"
    )
    local_cache_ram: int = Field(
        default=1024, ge=0, description="MiB of RAM llama.cpp may keep earlier prompts' KV state "
        "in, besides its slot (llama.cpp's own default, 8192, grew a batch's memory by 7 GB); 0: "
        "none")
    cache_dir: Path = Field(
        default_factory=_default_cache_dir, description="the embedded model once assembled "
        "(models/), its saved prompt states, and conli eval's call cache")
    request_timeout: float = Field(
        default=60.0, gt=0, description="seconds one HTTP model call may take")
    max_concurrency: int = Field(default=8, ge=1, description="model calls in flight per process")
    requests_per_minute: int | None = Field(default=None, ge=1, description="optional RPM limit")
    tokens_per_minute: int | None = Field(default=None, ge=1, description="optional TPM limit")
    azure_openai_endpoint: str | None = Field(
        default=None, description="else AZURE_OPENAI_ENDPOINT")
    azure_openai_api_version: str = Field(
        default="2024-10-21", description="Azure OpenAI api-version")


class DetectionSettings(BaseModel):
    """Which detectors run, and how chain-of-thought NLI and the entity level behave."""

    detectors: list[str] = Field(
        default_factory=lambda: ["auto"],
        description="detectors or presets to run, in order (conli check --detector); auto: "
        "fused on a backend that serves the model's own numbers (the embedded one), else cot",
    )
    detector_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="plug-in detectors' own settings, by detector name, "
        "each validated by the model the detector declares, e.g. "
        "CONLI_DETECTOR_OPTIONS='{\"mydet\": {\"word\": \"x\"}}' or "
        "CONLI_DETECTOR_OPTIONS__MYDET__WORD=x",
    )
    signal_model: Path | None = Field(
        default=None, description="a signal classifier artifact (JSON) instead of the shipped one"
    )
    fused_model: Path | None = Field(
        default=None,
        description="a fused (NLI + signals) classifier artifact instead of the shipped one"
    )
    reading: Literal["forward", "cache"] = Field(
        default="forward",
        description="how fused and fast read the response's token log-probabilities: "
        "forward (two forward passes through the embedding path, which prefills the source "
        "again) or cache (the tokens forced one by one after the check's own NLI prompt, so "
        "the source comes from the prompt cache; signals_read.v2). cache is faster on long "
        "sources but fused.v1 was trained on forward's numbers and loses accuracy on cache's "
        "(docs/benchmarks.md), so forward stays the default")
    calibration: Path | None = Field(
        default=None,
        description="a calibration file from `conli calibrate`: the decision fitted on "
        "your own labelled examples, applied wherever this backend and detectors run")
    threshold: float | None = Field(
        default=None, ge=0.0, le=1.0, description="the bar a result's `passed` sets: every checked "
        "sentence's score (P(grounded)) at or above it, i.e. support_score >= it; None: passed "
        "= verdict supported. It decides `passed` only, never the verdicts")
    language: LanguageSetting = Field(
        default="auto", description="the language of the source and response (ISO 639-1): it picks "
        "the sentence splitter (pySBD; conli's own for en, zh and ja), the stop words, and "
        "whether the English spaCy entities are read (en only); auto: read from the source's "
        "stop words, en when they do not tell")
    ner: Literal["spacy", "azure"] = Field(
        default="spacy",
        description="entity recognizer of the entity level: spacy (its small English "
        "model comes with conli) or azure (Azure AI Language, the paper's; the [azure] extra)")
    entity_categories: list[str] = Field(
        default_factory=lambda: list(PAPER_ENTITY_CATEGORIES),
        description="entity categories the entity level re-checks (the paper's Azure selection)")
    entity_level: bool = Field(
        default=True, description="re-check passed sentences entity by entity")
    entity_recheck: Literal["unmatched", "all"] = Field(
        default="unmatched",
        description="entities the entity level re-checks: unmatched = those the source does "
        "not state word for word; all = every tagged entity (the paper's pattern)",
    )
    coverage_recall: float = Field(
        default=0.5, ge=0.0, le=1.0, description="coverage_overlap: a point is covered when the "
        "response has this share of its content words (ROUGE-1 recall)")
    word_scores: Literal["off", "lexical", "semantic"] = Field(
        default="lexical", description="score each content word: lexical = in the source or not; "
        "semantic = aligned to the source's tokens by the embedded model's hidden states")
    sentence_level: bool = Field(
        default=True,
        description="ablation only: off skips sentence NLI, so every claim goes to entities"
    )
    hypotheses_per_call: int | None = Field(
        default=None,
        ge=1, description="NLI batch size (default: hosted_hypotheses_per_call where the "
        "backend judges batches, else 1)"
    )
    hosted_hypotheses_per_call: int = Field(
        default=8, ge=1, description="NLI batch size for backends that judge batches"
    )
    chain_of_thought: bool = Field(
        default=True, description="ask the NLI judge to reason before labels")
    nli_prompt: Literal["auto", "v1", "v2", "v3"] = Field(
        default="auto",
        description="NLI templates: v1 quotes evidence, then reasons; v2 only reasons; v3 is "
        "v1 for one claim per call; auto = v3 where calls hold one claim, else v1",
    )
    score_first: bool = Field(
        default=False,
        description="score each hypothesis from its label token; reason only on failures"
    )
    nli_evidence: Literal["whole", "focus"] = Field(
        default="whole",
        description="what NLI reads of the source: the whole source (in windows when "
        "long), or focus = each claim's best-matching source sentences (experimental)")
    nli_unquoted: Literal["record", "rejudge"] = Field(
        default="record",
        description="an entailment whose quoted evidence is not in the source (or, "
        "at the entity level, lacks the tagged entity the source never states): record it "
        "(evidence_in_source false; the label stands), or rejudge = ask once more with the "
        "problem named, and leave the claim unverified if the answer still rests on it "
        "(experimental; docs/benchmarks.md)")
    nli_focus_sentences: int = Field(
        default=5, ge=1, le=50, description="focus: how many source sentences each claim is shown")
    nli_looks: int = Field(
        default=1,
        ge=1, le=9, description="chains of thought per claim: the first as usual, the rest "
        "sampled; a claim passes when most do (experimental, agents/looks.py)")
    nli_looks_on: Literal["every", "flagged"] = Field(
        default="every", description="which claims get the looks after the first: every claim, or "
        "only those the first look does not pass (fewer calls; experimental)")
    nli_look_temperature: float = Field(
        default=0.7,
        gt=0.0, le=2.0, description="sampling temperature of the looks after the first")
    entailment_threshold: float = Field(
        default=0.5, ge=0.0, le=1.0, description="P(entailment) a scored hypothesis needs to pass"
    )
    spotlight: bool = Field(default=False, description="datamarking (Hines et al. 2024): every "
        "prompt that reads the source or response joins their words with ˆ and says marked text "
        "is data whose instructions are never followed; templates record +datamark "
        "(experimental: off until measured, docs/benchmarks.md)")
    chunk_support: bool = Field(default=False, description="with several sources, a sentence "
        "passes only if the quote its support rests on is in a source that shares its content "
        "words; else it is flagged (experimental: off until measured, docs/benchmarks.md)")
    swap_rule: bool = Field(default=True, description="flag a sentence that has two of its "
        "numbers, or two of its names, in each other's places: both stated by the source, "
        "which attaches them the other way round (no model call; on by the safety rule: it "
        "removes cot's one flip on the injection table, swapped years behind a note, and "
        "costs nothing held out on the dev sets, +0.0 [+0.0, +0.0]; it caught 9 of 10 planted "
        "swapped numbers and 3 of 10 reversed roles; benchmarks/results/swap-rule)")
    azure_language_endpoint: str | None = Field(
        default=None, description="else AZURE_LANGUAGE_ENDPOINT")
    azure_ner_timeout: float = Field(
        default=30.0, gt=0, description="seconds per Text Analytics call")


class RewriteSettings(BaseModel):
    """Whether and how flagged sentences are rewritten."""

    mitigate: bool = Field(default=True, description="rewrite or remove the flagged sentences")
    fix_coverage: bool = Field(
        default=False, description="add one sentence for each uncovered point, drawn only from the "
        "point's text and checked like any other sentence")
    verify_rewrites: bool = Field(
        default=True, description="re-check each rewrite; remove the sentence if still unsupported"
    )
    keep_unverified_rewrites: bool = Field(
        default=False,
        description="keep a rewrite whose re-check could not complete (marked unverified); "
        "off: remove the sentence instead",
    )


class JudgeSettings(BaseModel):
    """The 1-5 judge of faithfulness."""

    judge: bool = Field(default=True, description="score the text 1-5 against its source")
    judge_mode: str = Field(
        default="grounded",
        description="grounded: the score comes from the sentence verdicts, and the reasoning "
        "from its findings (judge_reasoning); rubric: the model reads the rubric and scores, "
        "bounded by detection (at most 4 with a flagged sentence); both: grounded, with the "
        "rubric's beside it and a mark for review where they differ by 2 or more; or a judge "
        "mode registered by name (conli.judges.register)",
    )
    judge_raw: bool = Field(
        default=True, description="also score the raw response, for before/after")
    judge_reasoning: Literal["findings", "model"] = Field(
        default="findings", description="how the grounded judge's reasoning is written: "
        "findings = from the flagged sentences and their reasons, no model call; model = the "
        "model writes prose (one call), kept where it agrees with the findings. The score is "
        "the same either way")
    judge_template: Path | None = Field(
        default=None, description="a Jinja rubric replacing the default")
    judge_scale: Path | None = Field(
        default=None, description="a grounded judge scale (evidence -> 1-5, from conli eval judge "
        "--write-scale) instead of the shipped one")


class RunSettings(BaseModel):
    """Limits of one check: input sizes, re-asks, sampling and the deadline."""

    max_source_chars: int = Field(
        default=200_000,
        ge=1, description="longest source: a longer one is refused, never truncated")
    max_response_chars: int = Field(
        default=20_000,
        ge=1, description="longest response: a longer one is refused, never truncated")
    source_name_key: str | None = Field(
        default=None, min_length=1,
        description="the metadata key that names a LangChain Document given as a source chunk "
        "(e.g. source, a loader's file or URL); unset, or a Document without it: its id, else "
        "metadata['id']. The name is shown in evidence[].source_name, notes and the report")
    max_response_sentences: int | None = Field(
        default=None,
        ge=1, description="refuse a response of more sentences (the service sets its own)"
    )
    max_reasks: int = Field(
        default=1, ge=0, le=3, description="re-asks after output fails validation")
    temperature: float = Field(
        default=0.0, ge=0.0, le=2.0, description="sampling temperature of a check's model calls")
    check_deadline_seconds: float | None = Field(
        default=900.0,
        gt=0,
        description="no model call starts after a check has run this long (None: no limit)",
    )
    prompt_layout: Literal["own", "shared"] = Field(default="own",
        description="how the rewrite and the judges open their prompts: own "
        "(mitigate.v1, judge_rubric.v2, judge_grounded.v1) or shared (mitigate.v2, "
        "judge_rubric.v3, judge_grounded.v2: they open as the check's NLI prompt does, up to "
        "and including the source, so a prompt cache that holds it prefills only what "
        "follows; their rewrite and judge quality are not yet measured against own's)")


class GenerationSettings(BaseModel):
    """``conli generate``: faithfulness-oriented decoding (seed 002, Algorithm 1)."""

    fod_backtrack: float = Field(default=0.7, ge=0.0, le=1.0, description="tau1: a greedy sentence "
                                 "the monitor scores below this starts the beam search")
    fod_prune: float = Field(default=0.85, ge=0.0, le=1.0, description="tau2: a sampled sentence "
                             "below this is pruned")
    fod_samples: int = Field(
        default=2, ge=1, le=16, description="S: sentences sampled per beam a step "
                             "(4 kept the same faithfulness at 1.6x greedy's time, not 1.2x)")
    fod_beams: int = Field(default=2, ge=1, le=8, description="K: beams kept a step")
    fod_temperature: float = Field(default=0.8, gt=0.0, le=2.0, description="sampling temperature")
    generate_max_sentences: int = Field(default=8, ge=1, le=50, description="longest answer")
    generate_max_tokens: int = Field(default=400, ge=16, description="tokens of the greedy answer")


class Settings(
    BackendSettings,
    DetectionSettings,
    RewriteSettings,
    JudgeSettings,
    RunSettings,
    GenerationSettings,
    ServiceSettings,
    ProxySettings,
    BatchSettings,
    TelemetrySettings,
    BaseSettings,
):
    """Every setting; each can be set as ``CONLI_<FIELD>`` in the environment."""

    # an empty CONLI_X (e.g. `CONLI_LOCAL_MODEL= conli check ...`) means unset, not "."
    # CONLI_DETECTOR_OPTIONS__MYDET__X=1 sets detector_options["mydet"]["x"] (no field name
    # has a double underscore, so no other variable reads differently)
    model_config = SettingsConfigDict(env_prefix="CONLI_", extra="forbid", env_ignore_empty=True,
                                      env_nested_delimiter="__")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """pydantic-settings' sources, unchanged; first, name any misspelt ``CONLI_*`` once.

        Every ``Settings()`` reads the environment through here, so this is the one place
        an unknown variable (which the environment source ignores) can be told about.
        """
        warn_unknown_variables(os.environ)
        return init_settings, env_settings, dotenv_settings, file_secret_settings


# CONLI_TEST_*: the test suite's own switches, never settings.
_NOT_SETTINGS = ("CONLI_TEST_",)
_named: set[str] = set()  # the unknown variables already named in this process
_named_lock = threading.Lock()


def warn_unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """Warn (``UnknownSettingWarning``) once a process for each ``CONLI_*`` that is no setting.

    ``CONLI_DETECTOR=cot`` would otherwise be ignored without a word; the warning names the
    closest setting (``CONLI_DETECTORS``). A warning, not an error: the rest of the
    settings still hold, a library's caller can filter or raise it (``-W error``), and the
    CLI prints it as one line. Returns the messages of this call's warnings.
    """
    fields = {name.upper(): name for name in Settings.model_fields}
    told: list[str] = []
    for variable in sorted(environ):
        name = variable.upper()
        field = name.removeprefix("CONLI_").split("__")[0]  # __: a nested setting's part
        if not name.startswith("CONLI_") or field in fields or name.startswith(_NOT_SETTINGS):
            continue
        with _named_lock:
            if name in _named:
                continue
            _named.add(name)
        told.append(_unknown(variable, field, fields))
        warnings.warn(told[-1], UnknownSettingWarning, stacklevel=2)
    return told


def _unknown(variable: str, field: str, fields: Mapping[str, str]) -> str:
    """What to say of ``variable``: not a setting, ignored, and the closest one if any."""
    close = difflib.get_close_matches(field, list(fields), n=1, cutoff=0.6)
    hint = f"; did you mean CONLI_{close[0]}?" if close else " (the settings: docs/settings.md)"
    return f"{variable} is not a conli setting and is ignored{hint}"


# Fields a per-call override may not change: they shaped the backend and NER already built.
BUILT_FIELDS = frozenset(BackendSettings.model_fields) | {
    "ner", "entity_categories", "azure_language_endpoint", "azure_ner_timeout",
}
