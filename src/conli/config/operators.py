"""The operators' settings groups: the service, the proxy, batch runs and telemetry.

``conli.config.Settings`` assembles them with the other groups into one flat object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class ServiceSettings(BaseModel):
    """``conli serve``: keys, limits and back-pressure."""

    service_api_keys: list[str] = Field(
        default_factory=list,
        description="keys accepted in the X-API-Key header; set as JSON, e.g. "
        "CONLI_SERVICE_API_KEYS='[\"k1\"]'",
    )
    service_max_body_bytes: int = Field(default=1_000_000, ge=1, description="largest request body")
    service_max_sentences: int = Field(default=200, ge=1, description="most sentences per response")
    service_timeout_seconds: float = Field(
        default=120.0, gt=0, description="per-request time limit")
    service_max_concurrent: int | None = Field(
        default=None,
        ge=1, description="requests run at once (default: the backend's max_concurrency)"
    )
    service_retry_after_seconds: int = Field(default=5, ge=1, description="Retry-After when full")
    service_batch_max_items: int = Field(
        default=64, ge=1, description="most items in one POST /v1/check/batch, and most "
        "responses in one POST /v1/judge (413 beyond)")
    service_max_streams: int = Field(
        default=4, ge=1, description="streamed checks open at once, counted apart from the "
        "request slots (429 beyond)")
    service_stream_idle_seconds: float = Field(
        default=30.0, gt=0, description="a stream whose client sends nothing for this long, while "
        "the server has nothing in progress on it (no check running, no verdict unsent), is "
        "ended")
    service_stream_min_rate: float = Field(
        default=4.0, gt=0, description="characters of the reply a stream must send for each second "
        "it keeps the server waiting, beyond its first CONLI_SERVICE_STREAM_IDLE_SECONDS, or "
        "it is ended: a client streaming a model's reply at a token a second passes, one "
        "sending a word every ten seconds does not hold its slot")


class ProxySettings(BaseModel):
    """``conli serve --upstream`` (the OpenAI-compatible guard) and the drop-in client."""

    proxy_upstream: str | None = Field(default=None, description="backend spec of the model that "
        "answers POST /v1/chat/completions; CONLI_LLM's own spec shares its backend with the check")
    proxy_on_flag: Literal["rewrite", "annotate", "block"] = Field(default="rewrite", description=
        "a reply not supported goes out rewritten, as written beside its verdicts, or as the "
        "refusal; a request's conli.on_flag may only be stricter (annotate < rewrite < block)")
    proxy_refusal: str = Field(default="I could not give an answer that the source supports.",
        min_length=1, description="sent in place of a blocked reply (finish_reason content_filter)")
    proxy_no_source: Literal["refuse", "pass"] = Field(default="refuse", description="a request "
        "with no source: refuse (422) or pass the reply marked unchecked")
    proxy_on_check_error: Literal["refuse", "pass"] = Field(default="refuse", description="a check "
        "that cannot run: refuse (its status, the reply unsent) or pass the reply marked unchecked")
    proxy_system_as_source: bool = Field(default=False, description="with no conli.sources and no "
        "tool message, check the reply against the system message")
    proxy_forward_client_key: bool = Field(default=False, description="send the client's bearer "
        "token to the upstream as its key (the proxy's key then comes in X-API-Key)")


class BatchSettings(BaseModel):
    """``conli batch``, and the result cache it shares with ``conli check``."""

    batch_concurrency: int | None = Field(
        default=None,
        ge=1, description="records run at once (default: the backend's max_concurrency)"
    )
    batch_stop_after_failures: int = Field(
        default=5,
        ge=0, description="stop the run (exit 3) after this many records in a row failed on "
        "the backend, or when the first this many all ended unverified on invalid answers (a "
        "backend that answers, but never as asked); those not run stay out of OUT for a re-run "
        "(0: never stop)")
    result_cache: bool = Field(
        default=True, description="conli check and conli batch answer a check already made "
        "(the same texts, settings, prompt templates, detectors, model and conli version) from "
        "a cache of results on disk, with no model call; off: every check runs (or --no-cache). "
        "The library's Checker uses one only when given it (conli.run.cache.ResultCache)")
    result_cache_dir: Path | None = Field(
        default=None, description="where the result cache lives (unset: <cache_dir>/results)")
    result_cache_mb: int = Field(
        default=512, ge=1, description="the result cache's size on disk, in MB: past it, the "
        "least recently used results are removed")


class TelemetrySettings(BaseModel):
    """What operators see beyond conli's ``conli.*`` loggers: OpenTelemetry events."""

    otel: bool = Field(
        default=False, description="emit OpenTelemetry's GenAI gen_ai.evaluation.result event "
        "for each checked text, through the LoggerProvider the application configured (needs "
        "the otel extra; conli configures no provider or exporter; read when the Checker is "
        "built)")
