"""Every class of failure the engines raise has a fix (issue: "a fix for every predicted
failure"), and the fix's launch re-plans to a start. The failures are the engines' own texts
(engines/*/layout.py, resolve.py, planning.py); each case names the flag change that removes it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest, plan
from tests.seedcase import SEED

QWEN36 = "Qwen/Qwen3.6-27B"
CASES = [
    pytest.param(  # context beyond the model (SGLang's derived context_length)
        PlanRequest(model=QWEN36, gpu="H100", engine="sglang==0.5.23",
                    args={"tp_size": 2, "context_length": 300000}),
        "is greater than the derived context_length (262144)", "--context-length 262144",
        id="sglang-context-beyond-the-model",
    ),
    pytest.param(  # context beyond the model, then sequences above the Mamba blocks (vLLM)
        PlanRequest(model="nvidia/Nemotron-H-56B-Base-8K", gpu="H100", engine="vllm==0.33.0",
                    args={"tensor_parallel_size": 2, "max_model_len": 9692}),
        "greater than the derived max_model_len", "--max-model-len 8192 --max-num-seqs",
        id="vllm-context-beyond-the-model",
    ),
    pytest.param(  # one request beyond the KV pool (vLLM's estimate)
        PlanRequest(model="meta-llama/Meta-Llama-3.1-8B", gpu="RTX 3090", engine="vllm==0.33.0",
                    args={"max_model_len": 131072}),
        "estimated maximum model length is", "--max-model-len",
        id="vllm-context-beyond-the-kv-cache",
    ),
    pytest.param(  # max_num_seqs above the Mamba cache blocks
        PlanRequest(model=QWEN36, gpu="A6000", engine="vllm==0.33.0",
                    args={"tensor_parallel_size": 2, "max_model_len": 32768,
                          "max_num_seqs": 1024}),
        "exceeds available Mamba cache blocks", "--max-num-seqs",
        id="vllm-sequences-above-the-mamba-blocks",
    ),
    pytest.param(  # a layout the engine cannot build: another layout of the same GPUs
        PlanRequest(model=QWEN36, gpu="RTX 4090", engine="sglang==0.5.23",
                    args={"tp_size": 6, "context_length": 32768}),
        "16 is not divisible by 6", "--tp-size 2 --pp-size 3",
        id="sglang-layout-it-cannot-build",
    ),
    pytest.param(  # a refused combination: pipeline stages with MTP
        PlanRequest(model=QWEN36, gpu="H100", engine="sglang==0.5.23",
                    args={**SEED, "tp_size": 1, "pp_size": 2}),
        "PP + speculative decoding (MTP) is only supported on prefill nodes",
        "--tp-size 2 --pp-size 1",
        id="sglang-pp-with-mtp",
    ),
    pytest.param(  # a refused combination: MTP with the radix cache (0.5.10), then memory
        PlanRequest(model=QWEN36, gpu="A6000", engine="sglang==0.5.10", args=SEED),
        "is not compatible with radix cache", "--disable-radix-cache --max-running-requests",
        id="sglang-mtp-with-the-radix-cache",
    ),
    pytest.param(  # a pool the budget cannot hold (the seed)
        PlanRequest(model=QWEN36, gpu="A6000", engine="sglang==0.5.9",
                    args={**SEED, "mem_fraction_static": 0.85}),
        "RuntimeError: Not enough memory.", "--max-running-requests 12",
        id="sglang-not-enough-memory",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("request_", "error", "flags"), CASES)
def test_the_fix_names_the_change_and_starts(request_, error, flags):
    e = explain_request(request_)
    assert e.plan.verdict == "fail" and error in e.plan.error
    best = e.fix.best
    assert best is not None and best.command_flags.startswith(flags), best
    fixed = plan(replace(request_, args=best.args))
    assert fixed.verdict == "ok", fixed.error


def test_weights_that_do_not_fit_get_more_gpus():
    """No flag holds 50.96 GiB of weights in a 24 GB card: the smallest count that starts."""
    req = PlanRequest(model=QWEN36, gpu="RTX 4090", engine="sglang==0.5.23",
                      args={"context_length": 32768})  # fmt: skip
    g = explain_request(req).fix.gpus
    assert g is not None and g.num_gpus == 3 and g.outcome.verdict == "ok"
    fixed = plan(replace(req, args=g.args, num_gpus=g.num_gpus))
    assert fixed.verdict == "ok"


def test_an_architecture_the_release_does_not_register_names_the_releases_that_do():
    req = PlanRequest(model="moonshotai/Kimi-K3", gpu="H100", engine="sglang==0.5.9",
                      args={"tp_size": 8})  # fmt: skip
    fix = explain_request(req).fix
    assert not fix.found and fix.note.endswith("do: --engine sglang==0.5.23")
