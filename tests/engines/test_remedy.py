"""The engines' messages that name their own fix (engines/remedy.py): each rule reads the text
the profile reproduces from the engine's code, and the fix search follows them in a row."""

from __future__ import annotations

import pytest

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest, plan
from servefit.engines.remedy import remedy_for
from servefit.engines.sglang.remedies import REMEDIES as SGLANG
from servefit.engines.vllm import common
from servefit.engines.vllm.remedies import REMEDIES as VLLM
from servefit.units import GiB

NEMOTRON = "nvidia/Nemotron-H-56B-Base-8K"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            common.mamba_blocks_error(1024, 175),
            ("sequences above the Mamba cache blocks", {"max_num_seqs": 175}),
        ),
        (common.mamba_blocks_error(1024, 0), None),  # "at most 0": no cap makes it start
        (
            common.max_seq_len_error(131072, 16 * GiB, 9 * GiB, 73728),
            ("context beyond the KV cache", {"max_model_len": 73728}),
        ),
        (common.max_seq_len_error(131072, 16 * GiB, 0, 0), None),  # no estimate printed
        # 70.0 of 79.19 GiB free at start: 0.88 of the GPU is free; one point below it
        (
            common.free_memory_error(70.0 * GiB, 79.19 * GiB, 0.92, 72.85 * GiB),
            ("utilization above the free memory", {"gpu_memory_utilization": 0.87}),
        ),
        (common.NO_MEMORY, None),
        (None, None),
    ],
)
def test_vllm_messages(error, expected):
    assert remedy_for(VLLM, error) == expected


def test_vllm_context_beyond_the_model_reads_the_derived_length():
    p = plan(PlanRequest(model=NEMOTRON, gpu="H100", engine="vllm==0.33.0",
                         args={"max_model_len": 9692, "tensor_parallel_size": 2}))  # fmt: skip
    # nvidia__Nemotron-H-56B-Base-8K.json: max_position_embeddings 8192
    assert "(max_position_embeddings=8192 or model_max_length=None" in p.error
    assert remedy_for(VLLM, p.error) == ("context beyond the model", {"max_model_len": 8192})


def test_sglang_context_beyond_the_model_reads_the_derived_length():
    p = plan(PlanRequest(model="Qwen/Qwen3.6-27B", gpu="H100", engine="sglang==0.5.23",
                         args={"context_length": 300000, "tp_size": 2}))  # fmt: skip
    # Qwen3.6-27B: text_config.max_position_embeddings 262144
    assert remedy_for(SGLANG, p.error) == ("context beyond the model", {"context_length": 262144})


def test_the_fix_follows_the_messages_in_a_row():
    """--max-model-len 9692 on an 8K model: the derived length first; at 8192 the engine's next
    message ("lower max_num_seqs to at most N") names the second change. Before, the fix was
    "more GPUs; no layout up to 64 GPUs starts"."""
    req = PlanRequest(model=NEMOTRON, gpu="H100", engine="vllm==0.33.0",
                      args={"max_model_len": 9692, "tensor_parallel_size": 2})  # fmt: skip
    e = explain_request(req)
    at_8k = plan(PlanRequest(model=NEMOTRON, gpu="H100", engine="vllm==0.33.0",
                             args={"max_model_len": 8192, "tensor_parallel_size": 2}))  # fmt: skip
    _, named = remedy_for(VLLM, at_8k.error)
    assert e.fix.found and e.fix.gpus is None
    assert (
        e.fix.best.command_flags == f"--max-model-len 8192 --max-num-seqs {named['max_num_seqs']}"
    )
    assert e.fix.best.outcome.verdict == "ok"


def test_sglang_speculation_with_the_radix_cache():
    """SGLang 0.5.10 (mamba_handler "error"): the seed's MTP with the radix cache on and the
    no_buffer strategy is a ValueError at launch; the flag that removes it turns the cache off
    (the message's other way needs SGLANG_ENABLE_SPEC_V2=1 in the environment as well)."""
    from tests.seedcase import SEED

    req = PlanRequest(model="Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.10", args=SEED)
    p = plan(req)
    assert "is not compatible with radix cache when using --mamba-scheduler-strategy" in p.error
    assert remedy_for(SGLANG, p.error) == (
        "speculative decoding with the radix cache",
        {"disable_radix_cache": True},
    )
    fix = explain_request(req).fix
    assert fix.best is not None and "--disable-radix-cache" in fix.best.command_flags
