"""`python -m vllm.entrypoints.openai.api_server ARGS` -> the stand-in engine, vLLM mode (test shim)."""

import sys

from tests.standin.engine import main

if __name__ == "__main__":
    sys.exit(main(["--engine", "vllm", *sys.argv[1:]]))
