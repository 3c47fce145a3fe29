"""Compare llama.cpp bindings on this machine: prefill and decode tokens/s, same GGUF.

    python benchmarks/experiments/issue-06-embedded-model/runtime_compare.py xllamacpp MODEL.gguf
    python benchmarks/experiments/issue-06-embedded-model/runtime_compare.py \\
        llama_cpp MODEL.gguf   # in a venv with llama-cpp-python

Prints one JSON line. Two threads, 4096 context, greedy decoding, no prompt cache reuse
for the prefill measurement (each prompt is new).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

FILLER = "The committee met on Tuesday to review the annual budget and the new proposals. "
PROMPT = [{"role": "user", "content": FILLER * 60 + "\nSummarise the text above."}]
COUNT = [{"role": "user", "content": "Count from 1 to 300, separated by commas."}]


def xllamacpp_runner(model: str) -> Any:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx = 4096
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    params.n_parallel = 1
    server = xllamacpp.Server(params)

    def run(messages: list[dict[str, str]], max_tokens: int) -> tuple[int, int, float]:
        started = time.perf_counter()
        reply = server.handle_chat_completions(
            {"messages": messages, "max_tokens": max_tokens, "temperature": 0,
             "cache_prompt": False}
        )
        return (reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"],
                time.perf_counter() - started)

    return run


def llama_cpp_runner(model: str) -> Any:
    from llama_cpp import Llama

    llm = Llama(model_path=model, n_ctx=4096, n_threads=2, n_threads_batch=2, verbose=False)

    def run(messages: list[dict[str, str]], max_tokens: int) -> tuple[int, int, float]:
        started = time.perf_counter()
        reply = llm.create_chat_completion(messages=messages, max_tokens=max_tokens,
                                           temperature=0)
        return (reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"],
                time.perf_counter() - started)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("runtime", choices=["xllamacpp", "llama_cpp"])
    parser.add_argument("model", help="the GGUF file")
    args = parser.parse_args()
    runtime, model = args.runtime, args.model
    started = time.perf_counter()
    run = xllamacpp_runner(model) if runtime == "xllamacpp" else llama_cpp_runner(model)
    load = time.perf_counter() - started
    run(COUNT, 1)  # warm-up
    prompt, _, seconds = run(PROMPT, 1)
    prefill = prompt / seconds
    count_prompt, generated, seconds = run(COUNT, 128)
    decode = generated / (seconds - count_prompt / prefill)
    print(json.dumps({"runtime": runtime, "load_s": round(load, 1),
                      "prefill_tokens": prompt, "prefill_tok_s": round(prefill, 1),
                      "decode_tokens": generated, "decode_tok_s": round(decode, 1)}))


if __name__ == "__main__":
    main()
