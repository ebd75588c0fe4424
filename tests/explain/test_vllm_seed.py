"""explain on the user's model and GPUs with vLLM 0.33.0: Qwen3.6-27B on 2x RTX A6000, MTP with
3 speculative tokens, 32K context.

Every lever value and every fix is a re-plan of the vLLM profile; the tests check what those
re-plans say against hand arithmetic from the model's config and the engine's rules (each
named), and against direct plan() calls of the same launches.
"""

from __future__ import annotations

import pytest

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest, plan
from servefit.engines.vllm.common import cdiv

MTP = {"method": "mtp", "num_speculative_tokens": 3}
SEED = {"tensor_parallel_size": 2, "max_model_len": 32768, "speculative_config": MTP}


def request(qwen36, engine: str = "vllm==0.33.0", **extra) -> PlanRequest:
    return PlanRequest(model=qwen36, gpu="A6000", engine=engine, args={**SEED, **extra})


def lever(e, name):
    return next(lv for lv in e.levers if lv.name == name)


def value(lv, label):
    return next(v for v in lv.values if v.label == label)


@pytest.fixture(scope="module")
def default_launch(qwen36):
    return explain_request(request(qwen36))


@pytest.fixture(scope="module")
def seqs_1024(qwen36):
    return explain_request(request(qwen36, max_num_seqs=1024))


# Qwen3.6-27B (config.json): 16 attention layers (4 KV heads x 256) + 48 Gated DeltaNet layers
# (16 key / 48 value heads of 128, conv kernel 4), one MTP attention layer. At TP 2:
#   attention, one token, one layer: 2 KV heads x 256 x 2 (K, V) x 2 B = 2,048 B
#   GDN state, one request, one layer (conv rows 3 + 3 speculative, mamba_ssm_dtype float32):
#     conv 6 x (2 x 16 x 128 + 48 x 128) / 2 x 2 B = 61,440 + ssm 24 x 128 x 128 x 4 B = 1,572,864
ATTN_TOKEN = 2 * 256 * 2 * 2
MAMBA_PAGE = 6 * (2 * 16 * 128 + 48 * 128) // 2 * 2 + 24 * 128 * 128 * 4
# Platform._align_hybrid_block_size: 16 (FLASH_ATTN on SM 8.6; no FlashInfer GDN checkpoint
# alignment below SM 9.0) x cdiv(mamba page, 16 x attention page of one token)
BLOCK = 16 * cdiv(MAMBA_PAGE, 16 * ATTN_TOKEN)
# 17 attention layers (16 + MTP) form one group of 17; 48 GDN layers 3 groups (3 padding
# layers). Per request at 32K: cdiv(32768, BLOCK) attention blocks + 3 groups x (2 + 3) blocks
# (Mamba cache mode align: MambaSpec.max_memory_usage_bytes, 0.33.0)
PER_REQUEST = cdiv(32768, BLOCK) + 3 * (2 + 3)


def test_hand_arithmetic_matches_the_plan(default_launch):
    p = default_launch.plan
    assert BLOCK == 800 and PER_REQUEST == 56
    assert p.pools.block_size == BLOCK
    assert p.pools.mamba_slots_per_request == 2 + 3
    assert p.pools.max_concurrency == pytest.approx(p.pools.num_blocks / PER_REQUEST)


def test_default_launch_starts_with_256_sequences(default_launch):
    """vllm/engine/arg_utils.py:get_batch_defaults (0.33.0): a 47.6 GiB device (< 70 GiB) gets
    256 sequences, not 1024, so the Mamba-block check (one block per sequence for FULL decode
    graphs) passes: the pool has more blocks than 256."""
    e = default_launch
    p = e.plan
    assert e.outcome.verdict == "ok"
    assert p.resolved_args["max_num_seqs"] == 256
    assert p.pools.mamba_blocks > 256
    # the KV pool binds, not max_num_seqs: blocks / blocks per request requests of 32K
    o = e.outcome
    assert o.full_context_requests == round(p.pools.num_blocks / PER_REQUEST, 2)
    assert o.effective_concurrency == o.full_context_requests
    why = "\n".join(e.why)
    assert "the KV pool, not the request cap, binds" in why
    assert "x gpu_memory_utilization 0.92 - non-KV" in why
    assert e.fix is None


def test_1024_sequences_fail_on_the_mamba_blocks_and_the_fix_is_one_flag(seqs_1024, qwen36):
    e = seqs_1024
    blocks = e.plan.pools.num_blocks
    # vllm/config/compilation.py:resolve_cudagraph_mode_and_sizes, the engine's own text
    assert e.plan.error.startswith(
        f"ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks ({blocks})"
    )
    assert blocks < 1024
    fix = e.fix
    assert fix.found and fix.min_free_gib == 1.0  # vLLM's default headroom beyond its budget
    (change,) = fix.best.changes
    assert change.flag == "--max-num-seqs" and change.old == 1024
    assert fix.best.command_flags == f"--max-num-seqs {change.new}"
    # re-planning the fixed launch directly gives the fix's own outcome
    fixed = plan(request(qwen36, max_num_seqs=change.new))
    assert fixed.verdict == "ok" and fixed.pools.max_total_num_tokens == fix.best.outcome.kv_tokens
    assert change.new <= fixed.pools.mamba_blocks
    assert fix.best.outcome.free_gib >= 1.0
    # the engine's own advice ("lower max_num_seqs to at most N") also starts once re-planned
    # (fewer sequences also shrink the sampler's profiling peak); the fix is no worse
    advice = explain_request(request(qwen36, max_num_seqs=blocks), with_fix=False)
    assert advice.outcome.verdict == "ok"
    assert fix.best.outcome.effective_concurrency >= advice.outcome.effective_concurrency


def test_utilization_alone_cannot_fix_1024_sequences(seqs_1024, qwen36):
    util = lever(seqs_1024, "gpu_memory_utilization")
    assert util.effect == "changes"
    assert all(v.outcome.verdict == "fail" for v in util.values)
    assert "no value tried makes it start" in util.reason
    top = plan(request(qwen36, max_num_seqs=1024, gpu_memory_utilization=0.98))
    assert top.verdict == "fail" and "exceeds available Mamba cache blocks" in top.error


def test_mamba_block_size_has_no_effect_in_align_mode(default_launch):
    """0.33.0 Platform._align_hybrid_block_size: in Mamba cache mode 'align' mamba_block_size
    becomes the attention block size, whatever --mamba-block-size says."""
    mbs = lever(default_launch, "mamba_block_size")
    assert default_launch.plan.resolved_args["mamba_cache_mode"] == "align"
    assert mbs.effect == "no effect"
    assert mbs.values and all(v.same_as_current for v in mbs.values)
    assert f"attention block size, {BLOCK} tokens" in mbs.reason


def test_mamba_block_size_is_rejected_without_prefix_caching(qwen36):
    """vllm/config/vllm.py:validate_mamba_block_size: only with --enable-prefix-caching."""
    e = explain_request(request(qwen36, enable_prefix_caching=False), with_fix=False)
    mbs = lever(e, "mamba_block_size")
    assert mbs.effect == "no effect"
    assert all(v.rejected and "--enable-prefix-caching" in v.rejected for v in mbs.values)
    assert "Mamba cache mode 'none'" in mbs.reason and "rejects any other value" in mbs.reason


def test_prefix_caching_costs_one_state_block_per_group(default_launch, qwen36):
    """0.33.0 turns prefix caching on for hybrids (mode align, 2 + k blocks per Mamba group);
    off, mode none holds 1 + k (v0_33_0/rules.py:mamba_blocks_per_request)."""
    pc = lever(default_launch, "enable_prefix_caching")
    assert default_launch.plan.resolved_args["enable_prefix_caching"] is True
    off = value(pc, "off").outcome
    assert off.state_slots_per_request == 1 + 3
    assert off.kv_tokens > default_launch.outcome.kv_tokens
    # the same launch on 0.24.0: off by default for hybrids, so turning it on costs the block
    old = explain_request(request(qwen36, engine="vllm==0.24.0"), with_fix=False)
    assert old.plan.resolved_args["enable_prefix_caching"] is False
    on = value(lever(old, "enable_prefix_caching"), "on").outcome
    assert (old.outcome.state_slots_per_request, on.state_slots_per_request) == (4, 5)
    assert on.kv_tokens < old.outcome.kv_tokens


def test_on_hopper_prefix_caching_also_sets_the_block_size(qwen36):
    """0.33.0 on SM 9.0: Qwen GDN prefill runs on FlashInfer, which in mode align exports a
    prefill checkpoint every block (one more state block per group) and aligns the block to 64
    (qwen_gdn_linear_attn.py, Platform._align_hybrid_block_size). Off, neither applies."""
    req = PlanRequest(model=qwen36, gpu="H100", engine="vllm==0.33.0", args=dict(SEED))
    e = explain_request(req, with_fix=False)
    off = value(lever(e, "enable_prefix_caching"), "off").outcome
    assert (e.outcome.state_slots_per_request, off.state_slots_per_request) == (2 + 3 + 1, 1 + 3)
    on_block = 64 * cdiv(MAMBA_PAGE, 64 * ATTN_TOKEN)
    assert (on_block, BLOCK) == (832, 800)
    on_plan = e.plan
    off_plan = plan(
        PlanRequest(
            model=qwen36,
            gpu="H100",
            engine="vllm==0.33.0",
            args={**SEED, "enable_prefix_caching": False},
        )
    )
    assert (on_plan.pools.block_size, off_plan.pools.block_size) == (on_block, BLOCK)
    on_per = cdiv(32768, on_block) + 3 * 6
    off_per = cdiv(32768, BLOCK) + 3 * 4
    assert on_plan.pools.max_concurrency == pytest.approx(on_plan.pools.num_blocks / on_per)
    assert off_plan.pools.max_concurrency == pytest.approx(off_plan.pools.num_blocks / off_per)
    assert off.full_context_requests == round(off_plan.pools.max_concurrency, 2)


def test_batched_tokens_do_not_size_memory_when_the_sampler_peaks(default_launch):
    lv = lever(default_launch, "max_num_batched_tokens")
    assert any(c.name == "activation peak (sampler)" for c in default_launch.plan.consumers)
    assert lv.effect == "no effect" and all(v.same_as_current for v in lv.values)
    assert "sampler's (max_num_seqs 256" in lv.reason


def test_speculative_tokens_and_flags(default_launch):
    e = default_launch
    spec = lever(e, "num_speculative_tokens")
    assert spec.flag == "--speculative-config.num_speculative_tokens" and spec.current == 3
    # each value re-planned: fewer speculative tokens, fewer state blocks per request
    for v in spec.values:
        k = v.args["speculative_config"]["num_speculative_tokens"]
        assert v.outcome.state_slots_per_request == 2 + k
    flags = {f.flag: f for f in e.user_flags}
    assert set(flags) == {"--tensor-parallel-size", "--max-model-len", "--speculative-config"}
    assert all(f.mattered for f in flags.values())
    par = lever(e, "parallelism")
    assert par.flag == "--tensor-parallel-size / --pipeline-parallel-size"


def test_cli_explain_json_for_a_vllm_launch(capsys, seqs_1024):
    import json

    from servefit.cli.main import main

    argv = ["explain", "--gpu", "A6000", "--format", "json", "--", "vllm", "serve"]
    argv += ["Qwen/Qwen3.6-27B", "-tp", "2", "--max-model-len", "32768", "--max-num-seqs", "1024"]
    argv += ["--speculative-config", json.dumps(MTP)]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    e = json.loads(capsys.readouterr().out)
    assert exc.value.code == 1  # predicted to fail
    assert e["plan"]["engine"]["name"] == "vllm"
    names = {lv["name"] for lv in e["levers"]}
    assert {"gpu_memory_utilization", "max_num_seqs", "max_model_len", "parallelism"} <= names
    assert e["fix"]["best"]["command_flags"] == seqs_1024.fix.best.command_flags
