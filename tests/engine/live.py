"""Which cases the real-engine suite starts, and how servefit is run against them.

One start per case, chosen to cover both releases, the three models, prefix caching on and off,
and both ways of sizing the KV memory; the full matrix of recorded logs is checked by the default
suite (tests/doctor/test_real_cpu_logs.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from tools import engine_env

# through `servefit launch`, with an API key and a Hub token
LAUNCHED = "launch-v0320-qwen35-pc-env1g-len512"
READY = [
    LAUNCHED,
    "v0320-qwen3next-nopc-bytes300m",
    # --max-num-seqs 1024 above its 762 Mamba blocks: a GPU start fails, the CPU build starts
    "v0240-qwen35-max-num-seqs-above-blocks",
    "v0240-qwen3-pc-env1g",
    # --dtype float32 on a bfloat16 checkpoint: twice the KV and Mamba page, block 256 not 384
    "v0320-qwen35-float32-bytes300m",
]
FAILING = ["v0240-qwen3-fail-unknown-flag", "v0240-qwen3-fail-max-model-len",
           "v0320-qwen3-fail-kv-beyond-node"]
CRASHING = "v0320-qwen35-fail-max-model-len"  # through `servefit launch --force`

KEY = "sk-real-vllm-key-7f3a9b2c4d5e"
HF = "hf_RealEngineTestTokenNotReal0123456"


def launch_env(runs: Path, release: str) -> dict[str, str]:
    """servefit's environment: the engine venv's `vllm` first on PATH, a private runs dir."""
    return {**os.environ, "PATH": f"{engine_env.venv_bin(release)}{os.pathsep}{os.environ['PATH']}",
            "SERVEFIT_RUNS_DIR": str(runs), "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}


def latest_run(runs: Path) -> Path:
    return max(runs.iterdir(), key=lambda p: p.name)
