"""`python -m sglang.launch_server ARGS` -> the stand-in engine, SGLang mode (test shim)."""

import sys

from tests.standin.engine import main

if __name__ == "__main__":
    sys.exit(main(["--engine", "sglang", *sys.argv[1:]]))
