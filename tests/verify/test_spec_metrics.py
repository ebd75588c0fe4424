"""Speculative acceptance from SGLang /server_info and vLLM /metrics.

Formulas: vllm/v1/spec_decode/metrics.py:SpecDecodingLogging.log (mean acceptance length =
1 + accepted / drafts, draft acceptance rate = accepted / draft tokens) and
sglang/srt/managers/scheduler_metrics_mixin.py:update_spec_metrics (accept length counts the
bonus token, so draft acceptance = (length - 1) / (draft tokens - 1)).
"""

from __future__ import annotations

import pytest

from servefit.verify.spec_metrics import parse_prometheus, sglang_stats, vllm_stats

# prometheus_client's text format for vLLM's counters (HELP/TYPE with _total, one sample per
# label set, _created series as a gauge family), two engines, three draft positions.
VLLM_METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 60.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 40.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 180.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 120.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 120.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 55.0
"""


def test_prometheus_samples_are_summed_over_labels():
    m = parse_prometheus(VLLM_METRICS)
    assert m["vllm:spec_decode_num_drafts_total"] == 100.0
    assert m["vllm:spec_decode_num_draft_tokens_total"] == 300.0
    assert m["vllm:spec_decode_num_accepted_tokens_total"] == 180.0
    assert m["vllm:spec_decode_num_drafts_created"] == 1.7e9


def test_vllm_acceptance_by_hand():
    s = vllm_stats(parse_prometheus(VLLM_METRICS))
    # 1 + 180 / 100 = 2.8 tokens per step; 180 / 300 = 60 %; 300 / 100 + 1 = 4 per step.
    assert s.enabled
    assert s.accept_length == pytest.approx(2.8)
    assert s.draft_acceptance == pytest.approx(0.6)
    assert s.num_draft_tokens == 4


def test_vllm_baseline_is_subtracted():
    before = parse_prometheus(VLLM_METRICS)
    now = dict(before)
    # 20 more drafts of 3 tokens, all 60 accepted: the run alone is a 100 % loop signature.
    now["vllm:spec_decode_num_drafts_total"] += 20
    now["vllm:spec_decode_num_draft_tokens_total"] += 60
    now["vllm:spec_decode_num_accepted_tokens_total"] += 60
    s = vllm_stats(now, before)
    assert (s.drafts, s.accept_length, s.draft_acceptance) == (20, 4.0, 1.0)


def test_vllm_without_spec_counters_is_off():
    assert not vllm_stats(parse_prometheus('vllm:num_requests_running{engine="0"} 0.0\n')).enabled


def test_sglang_seed_numbers():
    # The seed deployment: NEXTN, 3 steps, topk 1, 4 draft tokens, "100 % acceptance":
    # SGLang's log accept rate = accept length / draft tokens = 1.0 -> accept length 4.0.
    info = {
        "speculative_algorithm": "NEXTN",
        "speculative_num_steps": 3,
        "speculative_num_draft_tokens": 4,
        "internal_states": [{"avg_spec_accept_length": 4.0}],
    }
    s = sglang_stats(info)
    assert (s.accept_length, s.draft_acceptance, s.num_draft_tokens) == (4.0, 1.0, 4)


def test_sglang_draft_tokens_from_steps_and_dp_average():
    info = {
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_num_draft_tokens": None,
        "internal_states": [{"avg_spec_accept_length": 2.0}, {"avg_spec_accept_length": 3.0}],
    }
    s = sglang_stats(info)
    # steps + 1 = 4 draft tokens; mean of the DP ranks 2.5; (2.5 - 1) / 3 = 0.5.
    assert (s.num_draft_tokens, s.accept_length, s.draft_acceptance) == (4, 2.5, 0.5)


def test_sglang_spec_off_and_not_yet_measured():
    assert not sglang_stats({"speculative_algorithm": None, "internal_states": [{}]}).enabled
    pending = sglang_stats({"speculative_algorithm": "NEXTN", "internal_states": [{}]})
    assert pending.enabled and pending.accept_length is None
