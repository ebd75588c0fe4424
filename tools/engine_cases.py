"""The real-engine start-ups: which release, tiny model, flags and environment each one uses.

Shared by tools/collect_engine_logs.py (which records the logs under tests/data/engine-logs/) and
the real-engine suite (tests/engine/), which starts some of them again and compares.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_MODEL_LEN = 4096
KV_ENV_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE, GiB
KV_BYTES = 300_000_000  # --kv-cache-memory-bytes: a size that is not a whole number of GiB
KV_BEYOND_NODE = 2**40  # 1 TiB: more than any NUMA node of the machines the suite runs on

# Qwen3.5 is saved as Qwen3_5ForConditionalGeneration (vLLM 0.24.0 has no text-only class);
# its vision tower is switched off so the engine runs text-only.
NO_MM = ("--limit-mm-per-prompt", '{"image":0,"video":0}')
MODEL_FLAGS = {"qwen35-tiny": NO_MM, "qwen3next-tiny": (), "qwen3-tiny": ()}


@dataclass(frozen=True)
class EngineCase:
    """One `vllm serve` start; `expect` is "ready" or "fail"."""

    name: str
    release: str
    model: str
    flags: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    expect: str = "ready"
    note: str = ""


# On CPUs with AMX tiles, vLLM 0.24.0 turns prefix caching (and chunked prefill) off for models
# with linear attention ("Disabled unsupported prefix caching and chunked prefill for linear
# attention on AMX CPU platforms.", vllm/platforms/cpu.py:CpuPlatform.check_and_update_config),
# after the Mamba block size was set for it: VllmConfig then rejects the launch ("--mamba-block-
# size can only be set with --enable-prefix-caching"). Without AMX these start.
AMX_PREFIX_CACHING = "AMX CPUs: 0.24.0 drops prefix caching for linear attention, then fails"


def _ready_cases() -> list[EngineCase]:
    cases = []
    combos = [("0.32.0", "qwen35-tiny"), ("0.32.0", "qwen3next-tiny"), ("0.32.0", "qwen3-tiny"),
              ("0.24.0", "qwen35-tiny"), ("0.24.0", "qwen3-tiny")]
    for release, model in combos:
        for pc in (True, False):
            for kv in ("env1g", "bytes300m"):
                flags = [*MODEL_FLAGS[model], "--max-model-len", str(MAX_MODEL_LEN),
                         "--enable-prefix-caching" if pc else "--no-enable-prefix-caching"]
                env = {}
                if kv == "env1g":
                    env["VLLM_CPU_KVCACHE_SPACE"] = KV_ENV_GIB
                else:
                    flags += ["--kv-cache-memory-bytes", str(KV_BYTES)]
                tag = release.replace(".", "")
                name = f"v{tag}-{model.removesuffix('-tiny')}-{'pc' if pc else 'nopc'}-{kv}"
                expect, note = "ready", ""
                if release == "0.24.0" and model != "qwen3-tiny" and pc:
                    expect, note = "fail", AMX_PREFIX_CACHING
                cases.append(EngineCase(name, release, model, tuple(flags), env, expect, note))
    return cases


def _failure_cases() -> list[EngineCase]:
    cases = []
    for release in ("0.32.0", "0.24.0"):
        tag = release.replace(".", "")
        # On a GPU this fails: "max_num_seqs (1024) exceeds available Mamba cache blocks (762)"
        # guards the capture of full CUDA graphs (vllm/config/compilation.py:
        # CompilationConfig, `cudagraph_mode.has_full_cudagraphs()`). The CPU build captures
        # none (cudagraph_mode NONE), so the same launch starts there.
        cases.append(EngineCase(
            f"v{tag}-qwen35-max-num-seqs-above-blocks", release, "qwen35-tiny",
            (*NO_MM, "--max-model-len", str(MAX_MODEL_LEN), "--no-enable-prefix-caching",
             "--kv-cache-memory-bytes", str(KV_BYTES), "--max-num-seqs", "1024"),
            note="--max-num-seqs 1024 above the 762 Mamba blocks: fails on a GPU only"))
        cases.append(EngineCase(
            f"v{tag}-qwen3-fail-max-model-len", release, "qwen3-tiny",
            ("--max-model-len", "65536", "--kv-cache-memory-bytes", str(64 * 2**20)),
            expect="fail", note="one request of --max-model-len does not fit the KV memory"))
        cases.append(EngineCase(
            f"v{tag}-qwen3-fail-unknown-flag", release, "qwen3-tiny",
            ("--max-model-len", str(MAX_MODEL_LEN), "--no-such-flag"),
            expect="fail", note="an unknown flag"))
    # vllm/config/scheduler.py:SchedulerConfig.verify_max_model_len refuses fewer batched
    # tokens than sequences
    cases.append(EngineCase(
        "v0320-qwen3-fail-batched-below-seqs", "0.32.0", "qwen3-tiny",
        ("--max-model-len", str(MAX_MODEL_LEN), "--max-num-batched-tokens", "64",
         "--max-num-seqs", "128", "--kv-cache-memory-bytes", str(KV_BYTES)),
        expect="fail", note="--max-num-batched-tokens below --max-num-seqs"))
    # the CPU worker refuses a KV size above its NUMA node's available memory
    # (vllm/v1/worker/cpu_worker.py:CPUWorker.determine_available_memory): 1 TiB is above it on
    # any machine this suite runs on
    cases.append(EngineCase(
        "v0320-qwen3-fail-kv-beyond-node", "0.32.0", "qwen3-tiny",
        ("--max-model-len", str(MAX_MODEL_LEN), "--kv-cache-memory-bytes", str(KV_BEYOND_NODE)),
        expect="fail", note="a KV size beyond the NUMA node's memory"))
    cases.append(EngineCase(
        "v0320-qwen35-fail-max-model-len", "0.32.0", "qwen35-tiny",
        (*NO_MM, "--max-model-len", "65536", "--kv-cache-memory-bytes", str(16 * 2**20)),
        expect="fail", note="one request of --max-model-len does not fit the KV memory"))
    return cases


def _dtype_cases() -> list[EngineCase]:
    # --dtype other than the checkpoint's (bfloat16): the weights, the KV cache and the Mamba
    # conv state at "auto" take it (vllm/config/model.py:_get_and_verify_dtype)
    cases = []
    for release, model, dtype in (("0.32.0", "qwen3-tiny", "float32"),
                                  ("0.32.0", "qwen35-tiny", "float32"),
                                  ("0.32.0", "qwen3next-tiny", "float16"),
                                  ("0.24.0", "qwen3-tiny", "float32")):
        tag = release.replace(".", "")
        cases.append(EngineCase(
            f"v{tag}-{model.removesuffix('-tiny')}-{dtype}-bytes300m", release, model,
            (*MODEL_FLAGS[model], "--max-model-len", str(MAX_MODEL_LEN), "--dtype", dtype,
             "--no-enable-prefix-caching", "--kv-cache-memory-bytes", str(KV_BYTES)),
            note=f"--dtype {dtype} on a bfloat16 checkpoint"))
    return cases


def _launch_cases() -> list[EngineCase]:
    # Started through `servefit launch` by the real-engine suite; a context of 512 tokens is
    # shorter than verify's default 1024-token prompts (their max_tokens must be clamped).
    return [EngineCase(
        "launch-v0320-qwen35-pc-env1g-len512", "0.32.0", "qwen35-tiny",
        (*NO_MM, "--max-model-len", "512", "--enable-prefix-caching"),
        {"VLLM_CPU_KVCACHE_SPACE": KV_ENV_GIB}, note="context shorter than verify's prompts")]


CASES: dict[str, EngineCase] = {
    c.name: c for c in _ready_cases() + _failure_cases() + _dtype_cases() + _launch_cases()}
