"""Hybrid sliding-window pools (gpt-oss): the SWA pool's line is not a draft pool, and the KV
token count is the full-attention pool's. Lines assembled from the engines' f-strings:
0.5.9 model_runner_kv_cache_mixin.py:set_num_tokens_hybrid_swa + memory_pool.py
_finalize_allocation_log (unlabeled; SWAKVPool builds the SWA pool first); 0.5.23
memory_pool.py (allocation_label "Full" / "SWA", swa_memory_pool.py:SWAKVPool)."""

from __future__ import annotations

from servefit.doctor import read_log

P = "[2026-02-01 00:05:03 TP0] "

V059 = [
    P + "Load weight begin. avail mem=78.00 GB",
    P
    + "Load weight end. elapsed=5.00 s, type=GptOssForCausalLM, dtype=torch.bfloat16, avail mem=66.00 GB, mem usage=12.00 GB.",
    P + "Use sliding window memory pool. full_layer_tokens=1165084, swa_layer_tokens=932067",
    P + "KV Cache is allocated. #tokens: 932067, K size: 5.33 GB, V size: 5.33 GB",
    P + "KV Cache is allocated. #tokens: 1165084, K size: 6.67 GB, V size: 6.67 GB",
    P + "Memory pool end. avail mem=18.00 GB",
]
V0523 = [
    P + "Use sliding window memory pool. full_layer_tokens=1165084, swa_layer_tokens=932067",
    P
    + "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1165084, K size: 6.67 GB, V size: 6.67 GB",
    P
    + "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 932067, K size: 5.33 GB, V size: 5.33 GB",
]


def test_0_5_9_unlabeled_pools():
    pools = read_log(V059).launches[-1].pools
    assert pools.kv_tokens == 1165084 and pools.swa_kv_tokens == 932067
    assert pools.draft_kv_tokens is None


def test_0_5_23_labeled_pools():
    pools = read_log(V0523).launches[-1].pools
    assert pools.kv_tokens == 1165084 and pools.swa_kv_tokens == 932067
    assert pools.draft_kv_tokens is None
