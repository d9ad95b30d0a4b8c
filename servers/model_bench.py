"""The native peer of `cargo xtask bench`'s model figures: llama.cpp (PyPI
`xllamacpp`) on one thread, greedy, on the GGUF Kiln ships, called in process
(no HTTP on the measured path).

    python model_bench.py MODEL.gguf

Loads the model, prints `{"ready": true, "load_ms": …}` on stdout, then reads
one JSON request a line on stdin (`{"prompt": RAW, "max_tokens": N,
"ignore_eos": BOOL}`; the prompt is the raw text with the chat template
already applied, special tokens parsed, no BOS added, as the GGUF says) and
answers each with one JSON line: the time to the first token and the
generation rate measured on the wall clock the way the page measures Kiln's
(`(tokens - 1) / (last token - first token)`), llama.cpp's own timings, the
text, and the process's resident memory now and at its peak. Exits when
stdin closes. Anything missing ends it with one line on stderr, exit code 2.

`playwright/bench/model.mjs` runs it with the local model's venv python.
"""

import json
import os
import sys
import time

# As `servers/local_model.py`, whose venv this runs in.
CONTEXT_TOKENS = 2048


def fail(message):
    print(f"model_bench: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def memory():
    """VmRSS and VmHWM of this process in bytes (Linux), else nothing."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        return {
            "rss_bytes": int(fields["VmRSS"].split()[0]) * 1024,
            "peak_rss_bytes": int(fields["VmHWM"].split()[0]) * 1024,
        }
    except (OSError, KeyError, ValueError):
        return {}


def main():
    if len(sys.argv) != 2:
        fail("usage: model_bench.py MODEL.gguf")
    try:
        import xllamacpp as xlc
    except ImportError as error:
        fail(
            f"the PyPI package `xllamacpp` is not installed for {sys.executable} ({error})\n"
            "hint: `cargo xtask bench` installs it"
        )

    params = xlc.CommonParams()
    params.model.path = sys.argv[1]
    params.n_ctx = CONTEXT_TOKENS
    params.n_parallel = 1
    params.cpuparams.n_threads = 1  # generation
    params.cpuparams_batch.n_threads = 1  # the prompt
    # The server's HTTP listener starts anyway; requests below never use it.
    params.port = 0
    params.hostnames = ["127.0.0.1"]
    started = time.perf_counter()
    try:
        server = xlc.Server(params)  # returns once the model is loaded
    except Exception as error:  # noqa: BLE001 - any failure is reported the same way
        fail(f"llama.cpp did not load {sys.argv[1]}: {error}")
    load_ms = (time.perf_counter() - started) * 1000
    print(json.dumps({"ready": True, "load_ms": load_ms, **memory()}), flush=True)

    for line in sys.stdin:
        if not line.strip():
            continue
        ask = json.loads(line)
        request = {
            "prompt": ask["prompt"],
            "max_tokens": ask["max_tokens"],
            "temperature": 0.0,  # greedy: the first of the highest logits
            "top_k": 1,
            "ignore_eos": bool(ask.get("ignore_eos", False)),
            "cache_prompt": False,  # the prompt is processed again each turn
            "stream": True,
        }
        pieces = []
        times = []
        chunks = []

        def on_chunk(chunk):
            text = (chunk.get("choices") or [{}])[0].get("text") or ""
            if text:
                pieces.append(text)
                times.append(time.perf_counter())
            chunks.append(chunk)
            return False  # go on

        started = time.perf_counter()
        server.handle_completions(request, on_chunk)
        timings = next((c["timings"] for c in reversed(chunks) if "timings" in c), {})
        finish = next(
            (c["choices"][0].get("finish_reason") for c in reversed(chunks) if c.get("choices")),
            None,
        )
        tokens = timings.get("predicted_n", 0)
        print(
            json.dumps(
                {
                    "ttft_ms": (times[0] - started) * 1000 if times else None,
                    "tokens_per_s": (tokens - 1) / (times[-1] - times[0]) if len(times) > 1 else None,
                    "output_tokens": tokens,
                    "prompt_tokens": timings.get("prompt_n"),
                    "llama_prompt_ms": timings.get("prompt_ms"),
                    "llama_tokens_per_s": timings.get("predicted_per_second"),
                    "finish_reason": finish,
                    "text": "".join(pieces),
                    **memory(),
                }
            ),
            flush=True,
        )
    # The server's threads do not end on their own; leave at once.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
