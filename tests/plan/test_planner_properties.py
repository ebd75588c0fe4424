"""Property tests: whatever the flags, the planner returns a Plan or raises servefit's own error.

And physical invariants of every plan that starts: pools fit in the GPU, tokens are page
aligned, concurrency never exceeds the state slots."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servefit._plan.planner import PlanRequest, plan
from servefit.errors import ServefitError
from servefit.model.inventory import load_model

MODELS = [
    "Qwen/Qwen3.6-27B",
    "Qwen/Qwen3-Next-80B-A3B-Thinking",
    "nvidia/Nemotron-H-56B-Base-8K",
    "meta-llama/Meta-Llama-3.1-8B",
    "Qwen/Qwen3-30B-A3B",
    "deepseek-ai/DeepSeek-V3",
    "Qwen/Qwen3.5-35B-A3B",
]
SPECS = {m: load_model(m) for m in MODELS}

maybe = lambda s: st.none() | s  # noqa: E731

ARGS = st.fixed_dictionaries(
    {},
    optional={
        "tp_size": st.integers(-1, 16),
        "pp_size": st.integers(0, 4),
        "mem_fraction_static": st.floats(-0.5, 1.5) | st.just(float("nan")),
        "max_running_requests": maybe(st.integers(-2, 5000)),
        "context_length": maybe(st.integers(-10, 600_000)),
        "mamba_full_memory_ratio": st.floats(-1, 5),
        "max_mamba_cache_size": maybe(st.integers(-3, 3000)),
        "mamba_ssm_dtype": st.sampled_from(["float32", "bfloat16", "float16"]),
        "kv_cache_dtype": st.sampled_from(["auto", "fp8_e4m3", "bf16", "fp8_e5m2"]),
        "speculative_algorithm": maybe(st.sampled_from(["NEXTN", "EAGLE", "NGRAM", "STANDALONE"])),
        "speculative_num_steps": maybe(st.integers(0, 8)),
        "speculative_eagle_topk": maybe(st.integers(0, 4)),
        "speculative_num_draft_tokens": maybe(st.integers(0, 16)),
        "disable_radix_cache": st.booleans(),
        "page_size": maybe(st.sampled_from([0, 1, 16, 64])),
        "chunked_prefill_size": maybe(st.sampled_from([-1, 0, 2048, 8192])),
    },
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    gpu=st.sampled_from(["A6000", "H100", "H200", "L4", "RTX 4090", "MI300X"]),
    engine=st.sampled_from(["sglang==0.5.9", "sglang==0.5.23", "sglang==0.5.12"]),
    args=ARGS,
    gpu_mem=maybe(st.integers(-100, 300_000)),
)
def test_planner_raises_only_servefit_errors(model, gpu, engine, args, gpu_mem):
    req = PlanRequest(model=SPECS[model], gpu=gpu, engine=engine, args=args, gpu_mem_mib=gpu_mem)
    try:
        p = plan(req)
    except ServefitError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert p.verdict in ("ok", "fail")
    if p.verdict == "ok":
        pools, r = p.pools, p.per_rank
        assert pools.max_total_num_tokens > 0
        assert pools.max_total_num_tokens % pools.page_size == 0
        assert pools.effective_max_running_requests >= 1
        if pools.max_mamba_cache_size is not None:
            assert pools.effective_max_running_requests <= pools.max_mamba_cache_size
        used = r.weights_gib + r.kv_cache_gib + r.mamba_state_gib + r.spec_state_gib
        assert used <= r.pre_load_free_gib + 1e-6
    else:
        assert p.error


def test_quantized_name_without_quant_config_is_warned():
    """The bundled Nemotron-3-Super-120B-A12B-FP8 config has no quantization_config
    (src/servefit/catalog/data/SOURCES.md: the FP8 details live in a separate file)."""
    spec = load_model("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    p = plan(PlanRequest(model=spec, gpu="H100", engine="sglang==0.5.9", args={"tp_size": 2}))
    assert any("no quantization_config" in w for w in p.warnings)
    q = plan(
        PlanRequest(
            model=SPECS["Qwen/Qwen3.6-27B"],
            gpu="A6000",
            engine="sglang==0.5.9",
            args={"tp_size": 2},
        )
    )
    assert not any("quantization_config" in w for w in q.warnings)
