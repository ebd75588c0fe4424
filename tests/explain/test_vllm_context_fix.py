"""A vLLM launch whose one request at --max-model-len does not fit: the minimal fix keeps the
GPU and flags and shortens the context to the longest that fits, the number vLLM's own error
text names (kv_cache_planning.py: "the estimated maximum model length is N") and its auto-fit
(--max-model-len -1) would pick. Llama-3.1-8B (bf16, 32 layers x 8 KV heads x 128) on one
RTX 3090, vLLM 0.33.0."""

from __future__ import annotations

import re
from dataclasses import replace

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest, plan


def test_fix_is_the_longest_context_that_fits():
    req = PlanRequest(
        model="meta-llama/Meta-Llama-3.1-8B",
        gpu="RTX 3090",
        engine="vllm==0.33.0",
        args={"max_model_len": 131072},
    )
    e = explain_request(req)
    # 131,072 tokens x 32 layers x 2 x 8 x 128 x 2 B = 16.0 GiB for one request
    assert "(16.0 GiB KV cache is needed" in e.plan.error
    estimate = int(re.search(r"estimated maximum model length is (\d+)", e.plan.error)[1])
    (change,) = e.fix.best.changes
    assert (change.flag, change.old, change.new) == ("--max-model-len", 131072, estimate)
    # the same number vLLM's auto-fit finds, re-planned
    auto = plan(replace(req, args={"max_model_len": -1}))
    assert auto.verdict == "ok" and auto.pools.context_len == estimate
    assert e.fix.best.context_loss == 131072 - estimate
