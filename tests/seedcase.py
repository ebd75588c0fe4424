"""The user's case (the seed of README.md): Qwen3.6-27B on 2x RTX A6000, MTP (NEXTN steps 3, topk 1,
4 draft tokens), 32K context, SGLang 0.5.9; and the hand-tuned flags that made it start."""

from __future__ import annotations

SEED = {
    "tp_size": 2,
    "context_length": 32768,
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}
HAND_TUNED = {
    "max_running_requests": 16,
    "mamba_full_memory_ratio": 0.5,
    "mem_fraction_static": 0.88,
}
# The seed's GPU model and engine as servefit options (the GPU count follows --tp-size).
SEED_TARGET_ARGV = ["--gpu", "A6000", "--engine", "sglang==0.5.9"]
# The seed case as `servefit fit` inputs: the user's GPUs, context, speculation and engine.
SEED_FIT = {
    "gpu": "A6000",
    "num_gpus": 2,
    "context": 32768,
    "spec": "mtp",
    "engine": "sglang==0.5.9",
}
PER_REQ = 76_972_032  # GDN state bytes per request at TP 2 (48 layers, conv bf16, ssm fp32)
MTP_ARGV = [
    "--speculative-algo",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]
# The seed's flags that size memory (model, TP, context, MTP): no port, host or parsers.
SEED_SIZING_ARGV = [
    "--model-path",
    "Qwen/Qwen3.6-27B",
    "--tp-size",
    "2",
    "--context-length",
    "32768",
    *MTP_ARGV,
]
# The seed command as the user wrote it (minus nohup and the redirections).
SEED_ARGV = [
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "Qwen/Qwen3.6-27B",
    "--port",
    "30000",
    "--host",
    "0.0.0.0",
    "--tp-size",
    "2",
    "--context-length",
    "32768",
    "--reasoning-parser",
    "qwen3",
    "--tool-call-parser",
    "qwen3_coder",
    *MTP_ARGV,
]
HAND_TUNED_ARGV = [
    "--max-running-requests",
    "16",
    "--mamba-full-memory-ratio",
    "0.5",
    "--mem-fraction-static",
    "0.88",
]
