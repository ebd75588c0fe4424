"""Every failure the SGLang profiles predict, and vLLM's start-up failures, recognised in the
engine's own wording.

The SGLang memory errors are produced by servefit's own profiles (whose texts mirror the wheels'
f-strings: v0_5_9/pools.py NOT_ENOUGH, flow/pools.py) and then embedded in a log the way the
engine prints them: "[ts TPn] Scheduler hit an exception: Traceback ..." with the exception as
the last line (sglang/srt/managers/scheduler.py:run_scheduler_process). The arg errors are the
texts the profiles raise (engines/sglang/v0_5_9/args.py, flow/args.py). vLLM texts are the f-strings of
vllm/v1/core/kv_cache_planning.py and vllm/v1/worker/utils.py (0.33) rendered with values.
"""

from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.doctor.diagnose import diagnose, root_cause
from servefit.doctor.launches import read_log
from tests.seedcase import SEED


def sglang_log(error: str, rank: str = "TP0") -> list[str]:
    return [
        "[2026-05-02 09:00:01] server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B', tp_size=2)",
        f"[2026-05-02 09:00:02 {rank}] Load weight begin. avail mem=47.17 GB",
        f"[2026-05-02 09:00:40 {rank}] Load weight end. elapsed=38.00 s, type=Qwen3_5ForConditionalGeneration, "
        "avail mem=21.69 GB, mem usage=25.48 GB.",
        f"[2026-05-02 09:00:41 {rank}] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 6360, in run_scheduler_process',
        "    scheduler = Scheduler(",
        error,
        "",
        "[2026-05-02 09:00:41] Received sigquit from a child process. It usually means the child failed.",
    ]


def planned_errors() -> list[tuple[str, str]]:
    """(engine version, error text) for failing plans of each mirrored release."""
    out = []
    p = plan(
        PlanRequest(
            model="Qwen/Qwen3.6-27B",
            gpu="A6000",
            engine="sglang==0.5.9",
            args={**SEED, "mem_fraction_static": 0.85},
        )
    )
    out.append(("0.5.9", p.error))
    # 0.5.23: weights leave nothing / the state cache gets no slot / the slots serve no request
    for fraction in (0.45, 0.55, 0.58):
        p = plan(
            PlanRequest(
                model="Qwen/Qwen3.6-27B",
                gpu="A6000",
                engine="sglang==0.5.23",
                args={**SEED, "mem_fraction_static": fraction},
            )
        )
        out.append(("0.5.23", p.error))
    return out


@pytest.mark.parametrize("version,error", planned_errors())
def test_predicted_memory_errors_are_recognised(version, error):
    assert error  # the profile predicts a failure for these inputs
    assert "Not enough" in error or "leave no GPU memory" in error or "too small to serve" in error
    log = read_log(sglang_log(error))
    ln = log.launches[-1]
    assert ln.outcome == "failed"
    rc = root_cause(ln)
    assert rc.kind == "startup_memory" and rc.error.message == error


def test_0_5_23_weights_error_numbers():
    text = (
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.45. "
        "Raise --mem-fraction-static above 0.541 (minimum viable = 1 - available/pre = 0.5402). If using "
        "speculative decoding, draft weights are now counted."
    )
    ln = read_log(sglang_log(text)).launches[-1]
    assert (
        ln.errors[0].numbers["mem_fraction_static"] == 0.45
        and ln.errors[0].numbers["suggested"] == 0.541
    )
    assert root_cause(ln).consumer == "weights"


ARG_ERRORS = [
    "ValueError: Currently standalone speculative decoding does not support dp attention.",
    "AssertionError: mamba extra_buffer is not supported for NemotronHForCausalLM model",
    "AssertionError: mamba_track_interval 2 must be greater than or equal to speculative_num_draft_tokens 4",
    "ValueError: --mamba-radix-cache-strategy extra_buffer needs mamba state, got LlamaForCausalLM.",
    "AssertionError: no_buffer only supports page_size=1.",
    "AssertionError: no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True.",
    "AssertionError: no_buffer do not support trtllm_mha attention backend.",
    "AssertionError: For SSM models, either chunk_size or page_size must be divisible by the other, got chunk_size=64, page_size=48",
    "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding.",
    "ValueError: speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', 'triton'); got attention_backend='trtllm_mha'. Use page_size == 1 or one of those backends.",
    "AssertionError: chunked_prefill_size must be divisible by page_size",
]


@pytest.mark.parametrize("text", ARG_ERRORS)
def test_arg_errors_are_recognised(text):
    ln = read_log(sglang_log(text)).launches[-1]
    assert root_cause(ln).kind == "arg_error" and root_cause(ln).error.message == text


def test_context_length_error_and_zero_requests():
    text = (
        "ValueError: Warning: User-specified context_length (300000) is greater than the derived context_length "
        "(262144). This may lead to incorrect model outputs or CUDA errors."
    )
    assert root_cause(read_log(sglang_log(text)).launches[-1]).kind == "arg_error"
    for text in (
        "AssertionError: max_running_request is zero",
        "AssertionError: Memory pool size is too small",
    ):
        assert root_cause(read_log(sglang_log(text)).launches[-1]).kind == "startup_memory"


def vllm_log(*lines: str) -> list[str]:
    return [
        "(APIServer pid=1) INFO 11-01 10:00:00 [startup.py:96] non-default args: {'model': 'Qwen/Qwen3.5-27B', "
        "'max_model_len': 262144, 'gpu_memory_utilization': 0.9}",
        "(EngineCore pid=90) INFO 11-01 10:01:30 [gpu_model_runner.py:5089] Model loading took 50.12 GiB memory and 80.1 seconds",
        *lines,
    ]


def test_vllm_max_model_len_error_gives_the_engines_estimate_as_fix():
    err = (
        "(EngineCore pid=90) ValueError: To serve at least one request with the model's max seq len (262144), "
        "(16.0 GiB KV cache is needed, which is larger than the available KV cache memory (9.21 GiB). Based on "
        "the available memory, the estimated maximum model length is 150784. Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
        "`max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
    r = diagnose(
        read_log(vllm_log(err)), command="vllm serve Qwen/Qwen3.5-27B --max-model-len 262144"
    )
    assert r.root_cause.kind == "startup_memory"
    assert "needs 16.0 GiB, the memory profile left 9.21 GiB" in r.root_cause.summary
    assert r.fix.best.changes[0].new == 150784 and r.fix.source == "log"
    assert r.fix.command == "vllm serve Qwen/Qwen3.5-27B --max-model-len 150784"


def test_vllm_log_without_a_vllm_profile_says_so(monkeypatch):
    from servefit.engines import registry

    monkeypatch.delitem(registry.RELEASES, "vllm")
    r = diagnose(
        read_log(vllm_log("ValueError: No available memory for the cache blocks.")), gpu="H100"
    )
    f = next(f for f in r.findings if f.code == "replan_unavailable")
    assert f.title == "re-planning vllm logs needs a vllm profile"
    assert r.root_cause.kind == "startup_memory"


@pytest.mark.parametrize(
    "line,kind",
    [
        (
            "(EngineCore pid=90) ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            "startup_memory",
        ),
        (
            "(EngineCore pid=90) ValueError: Free memory on device cuda:0 (20.5/79.19 GiB) on startup is less than desired "
            "GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
            "processes.",
            "startup_memory",
        ),
        (
            "(EngineCore pid=90) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
            "capacity of 79.19 GiB of which 1.06 GiB is free.",
            "cuda_oom",
        ),
        (
            "(Worker_TP1 pid=91) RuntimeError: CUDA error: an illegal memory access was encountered",
            "illegal_memory_access",
        ),
        (
            "(Worker_TP1 pid=91) RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
            "unhandled cuda error",
            "nccl",
        ),
    ],
)
def test_vllm_failures(line, kind):
    ln = read_log(vllm_log(line)).launches[-1]
    assert ln.outcome == "failed" and root_cause(ln).kind == kind


def test_free_memory_error_numbers():
    line = (
        "ValueError: Free memory on device cuda:0 (20.5/79.19 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.27 GiB)."
    )
    rc = root_cause(read_log(vllm_log(line)).launches[-1])
    assert "only 20.5 of 79.19 GiB was free" in rc.summary


def test_runtime_oom_after_ready_is_a_runtime_failure():
    lines = sglang_log("x")[:3] + [
        "[2026-05-02 09:01:10] The server is fired up and ready to roll!",
        '[2026-05-02 09:02:00] INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "[2026-05-02 09:02:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of "
        "47.41 GiB of which 512.00 MiB is free.",
    ]
    ln = read_log(lines).launches[-1]
    err = ln.errors[0]
    assert (err.kind, err.phase, err.numbers["alloc"], err.numbers["free"]) == (
        "cuda_oom",
        "runtime",
        1.5,
        512.0,
    )
    assert "while serving trying to allocate 1.5 GiB with 512.0 MiB free" in root_cause(ln).summary
