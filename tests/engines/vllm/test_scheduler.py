"""SchedulerConfig's checks (engines/vllm/resolve.py:_scheduler_checks) against the engine's
code: vllm/config/scheduler.py:SchedulerConfig.verify_max_model_len (config.py:SchedulerConfig.
_verify_args in 0.10.0, a model_validator in 0.10.1-0.14.x; the same checks and texts in every
release 0.10.0-0.33.0, read in the wheels), raised inside pydantic's validation. The real
engine's refusal is tests/data/engine-logs/v0320-qwen3-fail-batched-below-seqs.log
(tests/engines/vllm/test_cpu.py compares it)."""

from __future__ import annotations

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from tests.engines.vllm.helpers import qwen3_8b

TITLE = "ValidationError: 1 validation error for SchedulerConfig: Value error, "


def vplan(version: str, **args):
    return plan(PlanRequest(model=qwen3_8b(), gpu="H100", engine=f"vllm=={version}", args=args))


@pytest.mark.parametrize("version", registry.available()["vllm"])
def test_fewer_batched_tokens_than_sequences_is_refused(version):
    p = vplan(version, max_model_len=4096, max_num_batched_tokens=64, max_num_seqs=128)
    assert p.error == (
        f"{TITLE}max_num_batched_tokens (64) must be greater than or equal to max_num_seqs (128)."
    )


@pytest.mark.parametrize("version", ["0.10.0", "0.24.0", "0.33.0"])
def test_without_chunked_prefill_one_batch_must_hold_a_whole_request(version):
    p = vplan(
        version, max_model_len=8192, max_num_batched_tokens=4096, enable_chunked_prefill=False
    )
    assert p.error == (
        f"{TITLE}max_num_batched_tokens (4096) is smaller than max_model_len (8192). This "
        "effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM "
        "reject longer sequences. Please increase max_num_batched_tokens or decrease "
        "max_model_len."
    )
    # with chunked prefill (the default) a request is prefilled in chunks: it starts
    assert vplan(version, max_model_len=8192, max_num_batched_tokens=4096).error is None


def test_more_batched_tokens_than_the_sequences_can_hold_is_a_warning():
    p = vplan("0.33.0", max_model_len=4096, max_num_batched_tokens=16384, max_num_seqs=2)
    assert p.error is None
    assert (
        "max_num_batched_tokens (16384) exceeds max_num_seqs * max_model_len (8192). This may "
        "lead to unexpected behavior."
    ) in p.log_lines


def no_length_key():
    return qwen3_8b(max_position_embeddings=None)  # the config's only length key, removed


@pytest.mark.parametrize("version", ["0.10.0", "0.24.0", "0.33.0"])
def test_a_config_without_a_length_key_takes_the_users_max_model_len(version):
    # config/model.py:_get_and_verify_max_len: no key -> `return max_model_len` when one is
    # given, else the default 2048
    engine = f"vllm=={version}"
    given = plan(PlanRequest(model=no_length_key(), gpu="H100", engine=engine,
                             args={"max_model_len": 40960}))  # fmt: skip
    assert given.error is None and given.resolved_args["max_model_len"] == 40960
    default = plan(PlanRequest(model=no_length_key(), gpu="H100", engine=engine, args={}))
    assert default.error is None and default.resolved_args["max_model_len"] == 2048
