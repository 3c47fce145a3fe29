"""Embedded backend: llama.cpp in-process through ``xllamacpp``, no key and no network.

One llama.cpp server runs inside this process. Its prompt cache keeps the KV state of the
last prompt (and more in RAM), so calls that share the static prefix and source only
prefill their hypothesis. ``prime`` saves a prompt's KV state to disk (llama.cpp's slot
save, on the in-process server's loopback port) and restores it in the next process, so
a fresh CLI run does not prefill the static prefix again. xllamacpp is imported only here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conli.backends.base import (
    CallUsage,
    Capabilities,
    Completion,
    CompletionRequest,
    Message,
    ScoredTokens,
    TokenLogprob,
    TokenReading,
    llama_cpp_split,
)
from conli.backends.forced_prefix import forced_prefix
from conli.backends.model_store import ensure_model
from conli.config import BackendSettings
from conli.errors import (
    BackendError,
    BackendUnavailableError,
    BadRequestError,
    ConliError,
    ContextOverflowError,
    install_hint,
)

if TYPE_CHECKING:
    from conli.backends.lm_head import OutputHead

TOP_LOGPROBS = 20  # alternatives llama.cpp returns per generated token, at most


class LocalBackend:
    """Qwen2.5-Coder-1.5B (or any GGUF) on the CPU via llama.cpp."""

    name = "local"

    def __init__(self, settings: BackendSettings) -> None:
        try:
            import xllamacpp
        except ImportError as exc:
            raise BackendUnavailableError(
                f"the embedded backend needs llama.cpp bindings: {install_hint('local')}"
            ) from exc
        path = settings.local_model or ensure_model(settings.cache_dir / "models")
        if not Path(path).is_file():
            raise BackendUnavailableError(f"model file not found: {path}")
        self.model = Path(path).name
        self.capabilities = Capabilities(
            context_window=settings.local_context,
            max_concurrency=1,  # one slot: parallel calls would only fight for two cores
            judges_batches=False,  # a 1.5B model judges only the first item of a batch
            continues_assistant=True,
            logprobs=TOP_LOGPROBS,
            counts_tokens=True,
            primes_prefix=True,
            hidden_states=True,
            scores_continuations=True,
        )
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = settings.local_context
        params.n_parallel = 1
        params.cpuparams.n_threads = settings.local_threads
        params.cpuparams_batch.n_threads = settings.local_threads
        params.verbosity = -1
        params.warmup = False
        # Embedding mode serves every token's final hidden state (``hidden_states``) beside
        # ordinary completions, which it does not slow; a whole prompt must then fit one
        # physical batch, so the batch is the context.
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_NONE
        params.n_batch = params.n_ubatch = settings.local_context
        self._state_dir = settings.cache_dir / "prefix-states"
        self._state_dir.mkdir(parents=True, exist_ok=True)
        params.slot_save_path = f"{self._state_dir}{os.sep}"
        # earlier prompts kept in host memory (a rewrite's check finds the source there);
        # bounded, as llama.cpp's default lets a long batch's memory grow by gigabytes
        params.cache_ram_mib = settings.local_cache_ram
        self._server: Any = xllamacpp.Server(params)
        self._lock = threading.Lock()
        self._prompt_cache = settings.local_prompt_cache
        stat = Path(path).stat()
        self._model_path = Path(path)
        self._output_head: OutputHead | None = None
        # A reading replaces the slot's KV cache; the prompt it held (static prefix, source,
        # hypothesis) is saved first and put back before the next completion, so the calls
        # after a reading do not prefill the source again (0.1 s instead of 10-20).
        self._saved: str | None = None  # a state file equal to the slot's KV cache, if any
        self._put_back: str | None = None  # set when a reading replaced the slot
        self._swap = f"swap-{os.getpid()}-{id(self):x}.bin"
        _remove_stale_swaps(self._state_dir)
        self._cache_dir = settings.cache_dir
        self._identity = [
            str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns,
            xllamacpp.__version__, settings.local_context,
        ]

    def complete(self, request: CompletionRequest) -> Completion:
        """Run one chat completion; map llama.cpp's error objects onto our error tree.

        Under a schema, the answer's forced opening is sent as the start of the assistant
        turn, so llama.cpp prefills it (its grammar continues from there) instead of
        decoding it token by token; the returned text includes it.
        """
        messages, schema = request.messages, request.json_schema
        prefill = ""
        if schema is not None and messages and messages[-1]["role"] != "assistant":
            prefill = forced_prefix(schema)
        sent = [*messages, {"role": "assistant", "content": prefill}] if prefill else messages
        body: dict[str, Any] = {
            "messages": [{"role": m["role"], "content": m["content"]} for m in sent],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": 0 if request.seed is None else request.seed,
            "cache_prompt": self._prompt_cache,
        }
        if request.top_logprobs:
            body.update(logprobs=True, top_logprobs=min(request.top_logprobs, TOP_LOGPROBS))
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
        self._restore_after_reading()
        return _to_completion(*self._chat(body), prefill)

    def _chat(self, body: dict[str, Any], *, aside: bool = False) -> tuple[dict[str, Any], float]:
        """One chat completion on the slot: llama.cpp's reply and its seconds, errors mapped.

        Unless ``aside`` (the slot's prompt was saved to be put back), the slot now holds
        this prompt, saved nowhere.
        """
        started = time.perf_counter()
        try:
            with self._lock:
                reply = self._server.handle_chat_completions(body)
        except ValueError as exc:
            raise BadRequestError(f"llama.cpp rejected the request: {exc}") from exc
        finally:
            if not aside:
                self._saved = None
        if "error" in reply:
            raise _map_error(reply["error"])
        return reply, time.perf_counter() - started

    def score_continuation(self, messages: list[Message], ids: list[int], *,
                           aside: bool = False) -> ScoredTokens:
        """Log-probability of each of ``ids`` as the answer to ``messages``, a decode step each.

        The tokens are forced by a token-level grammar; llama.cpp reports each one's
        log-probability before the grammar acts, over the whole vocabulary. The prompt is a
        chat completion's, so the prefix the slot holds (the check's NLI prompt through the
        source) is not prefilled again. ``aside``: the slot's prompt is saved first and put
        back before the next completion, as after a forward-pass reading.
        """
        import numpy as np

        if not ids:
            raise ValueError("no tokens to score")
        if aside:
            self._keep_slot()
        else:
            self._restore_after_reading()
        body: dict[str, Any] = {
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": len(ids), "temperature": 0.0, "seed": 0,
            "cache_prompt": self._prompt_cache, "logprobs": True, "top_logprobs": 1,
            "grammar": "root ::= " + " ".join(f"<[{int(i)}]>" for i in ids),
        }
        completion = _to_completion(*self._chat(body, aside=aside))
        if len(completion.logprobs) != len(ids):
            raise BackendError(
                f"llama.cpp scored {len(completion.logprobs)} of {len(ids)} forced tokens")
        return ScoredTokens(np.asarray([t.logprob for t in completion.logprobs],
                                       dtype=np.float32), completion.usage)

    def prime(self, messages: list[Message]) -> float:
        """Make ``messages``' KV state current; return the seconds it took.

        Restored from disk if this model saved it before, else prefilled once and saved.
        The state is remembered: a forward-pass reading replaces the slot's KV cache, so
        the next completion restores it first (``_restore_after_reading``). A speed-up
        only: any failure falls back to prefilling.
        """
        if not self._prompt_cache:
            return 0.0
        started = time.perf_counter()
        key = json.dumps([self._identity, messages], sort_keys=True)
        name = f"prefix-{hashlib.sha256(key.encode()).hexdigest()[:32]}.bin"
        if (self._state_dir / name).is_file() and self._slot_action("restore", name):
            self._saved, self._put_back = name, None
            return time.perf_counter() - started
        self.complete(CompletionRequest(messages, max_tokens=1))
        if save_state(self._state_dir / name, lambda file: self._slot_action("save", file)):
            self._saved = name
        return time.perf_counter() - started

    def _keep_slot(self) -> None:
        """Before a reading replaces the slot: save the prompt it holds, unless saved."""
        if self._put_back is not None or not self._prompt_cache:
            return  # an earlier reading replaced it already: what it saved stands
        if self._saved is None and self._slot_action("save", self._swap):
            self._saved = self._swap
        self._put_back = self._saved

    def _restore_after_reading(self) -> None:
        """Put the slot's prompt back if a reading replaced it (0.1 s, not a prefill)."""
        if self._put_back is not None and self._slot_action("restore", self._put_back):
            self._saved = self._put_back
        self._put_back = None

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in this model, from llama.cpp's ``/tokenize``."""
        reply = self._post("/tokenize", {"content": text})
        if reply is None or not isinstance(reply.get("tokens"), list):
            raise BackendError("llama.cpp could not tokenize the text")
        return len(reply["tokens"])

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of ``text``; ``special`` parses chat-template markers, else they are text."""
        reply = self._post("/tokenize", {"content": text, "parse_special": special,
                                         "add_special": False})
        tokens = None if reply is None else reply.get("tokens")
        if not isinstance(tokens, list):
            raise BackendError("llama.cpp could not tokenize the text")
        return [int(t) for t in tokens]

    def apply_template(self, messages: list[Message], *, generation_prompt: bool) -> str:
        """The model's own chat template applied to ``messages``, as text."""
        reply = self._post("/apply-template", {"messages": messages,
                                               "add_generation_prompt": generation_prompt})
        prompt = None if reply is None else reply.get("prompt")
        if not isinstance(prompt, str):
            raise BackendError("llama.cpp could not apply the chat template")
        return prompt

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``text``'s tokens (plain text) as (id, start, end) character offsets.

        llama.cpp gives each token's piece (bytes where a piece splits a character); the
        pieces' byte lengths, summed, are mapped back to character offsets.
        """
        reply = self._post("/tokenize", {"content": text, "with_pieces": True,
                                         "parse_special": False, "add_special": False})
        tokens = None if reply is None else reply.get("tokens")
        if not isinstance(tokens, list):
            raise BackendError("llama.cpp could not tokenize the text")
        char_at = _char_offsets(text)
        spans: list[tuple[int, int, int]] = []
        cursor = 0
        try:
            for token in tokens:
                piece = token["piece"]
                size = len(bytes(piece) if isinstance(piece, list) else piece.encode())
                spans.append((int(token["id"]), char_at[cursor], char_at[cursor + size]))
                cursor += size
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise BackendError("llama.cpp returned token pieces that do not add up") from exc
        if cursor != len(text.encode()):
            raise BackendError("llama.cpp's token pieces do not cover the text")
        return spans

    def read_tokens(self, ids: list[int], score_from: int) -> TokenReading:
        """Hidden states at every position; log-prob and entropy of tokens from ``score_from``."""
        import numpy as np

        if not 1 <= score_from <= len(ids):
            raise ValueError(f"score_from {score_from} is outside 1..{len(ids)}")
        self._keep_slot()
        reply = self._post_any("/embedding", {"content": ids}, timeout=3600)
        try:
            states = np.asarray(reply[0]["embedding"], dtype=np.float32)
        except (TypeError, KeyError, IndexError, ValueError) as exc:
            raise BackendError("llama.cpp returned no hidden states") from exc
        if states.ndim != 2 or states.shape[0] != len(ids):
            raise BackendError(f"llama.cpp returned hidden states of shape {states.shape}")
        logp, entropy = self._head().score(states[score_from - 1 : len(ids) - 1],
                                           ids[score_from:])
        return TokenReading(states=states, logp=logp, entropy=entropy)

    def _head(self) -> OutputHead:
        """The output head, memory-mapped on first use (converted once per model file)."""
        from conli.backends.lm_head import load_output_head

        if self._output_head is None:
            self._output_head = load_output_head(self._model_path, self._cache_dir / "lm-head")
        return self._output_head

    def _slot_action(self, action: str, filename: str) -> bool:
        """POST llama.cpp's ``/slots/0?action=...``; True when it reports success."""
        return self._post(f"/slots/0?action={action}", {"filename": filename}) is not None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST JSON to the in-process server's loopback port; its JSON object, or None."""
        answer = self._post_any(path, body)
        if answer is None:
            return None
        return answer if isinstance(answer, dict) else {}

    def _post_any(self, path: str, body: dict[str, Any], timeout: float = 60) -> Any:
        """POST JSON to the in-process server's loopback port; its JSON reply, or None."""
        request = urllib.request.Request(
            f"{self._server.listening_address}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with self._lock, urllib.request.urlopen(request, timeout=timeout) as reply:
                if reply.status != 200:
                    return None
                return json.loads(reply.read() or b"{}")
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def close(self) -> None:
        """Stop the in-process server and free the model (and this process's swap state)."""
        self._server = None
        (self._state_dir / self._swap).unlink(missing_ok=True)


def save_state(path: Path, save: Callable[[str], bool]) -> bool:
    """Have ``save`` write a state file under a fresh name beside ``path``, then rename it there.

    ``save`` gets the temporary file's name in ``path``'s folder (llama.cpp's slot-save
    folder). The name is unique per call (``tempfile.mkstemp``), not per process, so two
    backends in one process priming the same prefix never write into one file, and the
    rename means no reader sees half a state. False, with nothing left behind, when the
    file cannot be made, ``save`` fails or the rename does: the caller keeps the slot it
    prefilled, as if no state had been saved.
    """
    try:
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(handle)
    except OSError:
        return False
    try:
        if save(Path(temp).name):
            os.replace(temp, path)
            return True
    except OSError:
        pass
    Path(temp).unlink(missing_ok=True)
    return False


def _remove_stale_swaps(state_dir: Path) -> None:
    """Delete swap states left by processes that are gone (killed before ``close``)."""
    for path in state_dir.glob("swap-*.bin"):
        try:
            os.kill(int(path.name.split("-")[1]), 0)
        except (ProcessLookupError, ValueError, IndexError):
            path.unlink(missing_ok=True)
        except OSError:
            pass  # alive, under another user


def _map_error(error: dict[str, Any]) -> ConliError:
    """Context overflow is the user's input problem; anything else is a failed call."""
    message = str(error.get("message", error))
    if error.get("type") == "exceed_context_size_error":
        return ContextOverflowError(
            f"the prompt needs {error.get('n_prompt_tokens')} tokens but the model context "
            f"holds {error.get('n_ctx')}; shorten the source or raise CONLI_LOCAL_CONTEXT"
        )
    if error.get("code") == 400:
        return BadRequestError(f"llama.cpp rejected the request: {message}")
    return BackendError(f"llama.cpp failed: {message}")


def _to_completion(reply: dict[str, Any], seconds: float, prefill: str = "") -> Completion:
    choice = reply["choices"][0]
    usage = reply.get("usage", {})
    tokens = (choice.get("logprobs") or {}).get("content") or []
    text = choice["message"].get("content") or ""
    if not text.startswith(prefill):  # llama.cpp returns the continued turn whole
        text = prefill + text
    return Completion(
        text=text,
        finish_reason=choice.get("finish_reason"),
        logprobs=tuple(
            TokenLogprob(
                token=str(token.get("token", "")),
                logprob=float(token.get("logprob", 0.0)),
                top={alt["token"]: float(alt["logprob"]) for alt in token.get("top_logprobs", [])},
            )
            for token in tokens
        ),
        usage=CallUsage(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            cached_tokens=int(usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            **llama_cpp_split(reply.get("timings")),
        ),
    )


def _char_offsets(text: str) -> list[int]:
    """For each UTF-8 byte offset of ``text`` (and its end), the character it falls in."""
    offsets: list[int] = []
    for index, char in enumerate(text):
        offsets += [index] * len(char.encode())
    return [*offsets, len(text)]
