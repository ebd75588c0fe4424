"""Every check against the stand-in server (tests/standin/openai_server.py, not an engine) with
its scripted behaviours: the status each check must reach, and the evidence behind it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servefit.verify.checks import CHECKS
from servefit.verify.checks.base import RooflineInputs, VerifyOptions
from servefit.verify.runner import verify

# Small requests and a short timeout keep a full run against the stand-in well under a second.
FAST = VerifyOptions(timeout_s=5.0, max_tokens=512, concurrency=(1, 3))

ORDER = [
    "liveness",
    "determinism",
    "degenerate",
    "reasoning",
    "tools",
    "warm",
    "speculative",
    "reference",
    "speed",
]


def statuses(report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_healthy_endpoint_is_fit(standin, engine):
    # No concurrency sweep here: the healthy stand-in answers instantly, so its timing is
    # noise; the sweep is tested on the slow behaviour.
    report = verify(standin(engine=engine).url, replace(FAST, concurrency=(1,)))
    assert [c.name for c in report.checks] == ORDER
    assert report.ok and report.engine == engine
    assert statuses(report) == {
        **dict.fromkeys(ORDER, "pass"),
        "reference": "skip",  # no --reference given
    }
    spec = report.check("speculative")
    # The stand-in runs at accept length 2.6 of 4 tokens per step: (2.6 - 1) / 3 = 53 %.
    assert spec.data["accept_length"] == pytest.approx(2.6, abs=0.02)
    assert spec.data["num_draft_tokens"] == 4
    assert "all 20 numbers present" in report.check("degenerate").evidence[0]
    assert report.check("warm").evidence[0].startswith("cached tokens: cold 0, warm ")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_seed_loop_with_full_acceptance_fails(standin, engine):
    # The seed: `thinking\n\n` forever with 100 % acceptance.
    report = verify(standin(behaviour="looping", engine=engine).url, FAST)
    s = statuses(report)
    assert not report.ok
    assert (s["degenerate"], s["reasoning"], s["speculative"]) == ("fail", "fail", "fail")
    degenerate = report.check("degenerate")
    assert degenerate.data["looping_prompts"] == 3
    # Each stream is cut as soon as the loop is certain: 160 chars + at most one check interval.
    assert all("stream stopped" in line for line in degenerate.evidence)
    assert "'thinking\\n\\n'" in degenerate.evidence[0]
    spec = report.check("speculative")
    assert spec.data["draft_acceptance"] == pytest.approx(1.0)
    assert "while the output loops" in spec.summary


def test_think_tags_in_content_fail_the_reasoning_check(standin):
    report = verify(standin(behaviour="think_leak").url, FAST)
    reasoning = report.check("reasoning")
    assert reasoning.status == "fail"
    assert reasoning.summary.startswith("<think> and </think> left in content")
    assert statuses(report)["degenerate"] == "pass"


def test_xml_tool_call_in_content_fails(standin):
    report = verify(standin(behaviour="xml_tools").url, FAST)
    tools = report.check("tools")
    assert tools.status == "fail"
    assert "left in content, unparsed" in tools.summary
    assert "<tool_call>\\n<function=get_weather>" in tools.evidence[-1]


def test_nondeterministic_greedy_output_is_flagged(standin):
    # The stand-in appends "(variant N)" after the answer: word 51+ differs, a late difference.
    report = verify(standin(behaviour="nondeterministic").url, FAST)
    determinism = report.check("determinism")
    assert determinism.status == "warn"
    assert determinism.data["first_difference_word"] >= 32
    assert "variant 0" in determinism.evidence[0] and "variant 1" in determinism.evidence[1]


def test_wrong_answer_after_a_cache_hit_fails_warm_rerun(standin):
    report = verify(standin(behaviour="warm_mismatch").url, FAST)
    warm = report.check("warm")
    # The stand-in answers a seen prompt with "Cached run, ...": no healthy answer starts so.
    assert warm.status == "fail"
    assert warm.data["first_difference_word"] == 0
    assert warm.data["cached_tokens"][0] == 0 and warm.data["cached_tokens"][1] > 0


def test_accept_length_near_one_warns(standin):
    report = verify(standin(behaviour="low_accept").url, FAST)
    spec = report.check("speculative")
    assert spec.status == "warn"
    assert spec.summary.startswith("accept length 1.02")


def test_speculation_off_is_skipped(standin):
    report = verify(standin(speculative=False).url, FAST)
    assert report.check("speculative").status == "skip"
    assert report.check("speculative").summary == "speculative decoding is off"


def test_slow_server_far_below_the_bound(standin):
    # 20 ms per token after a 50 ms TTFT: at most 50 tok/s, whatever the machine. Only the
    # speed check runs (with liveness first), so no accept length is measured and the bound is
    # plain: Llama-3.1-8B, H100 (3,350 GB/s), TP 1 -> 3,350e9 / ~15.0e9 bytes = ~223 tok/s.
    server = standin(behaviour="slow", ttft_s=0.05, token_delay_s=0.02)
    options = replace(
        FAST,
        speed_max_tokens=24,
        concurrency=(1, 3),
        roofline=RooflineInputs("meta-llama/Meta-Llama-3.1-8B", "H100", tp=1),
    )
    only = tuple(c for c in CHECKS if c.name in ("liveness", "speed"))
    speed = verify(server.url, options, checks=only).check("speed")
    assert speed.status == "warn"
    assert 210 < speed.data["bound_tok_s"] < 235
    assert speed.data["decode_tok_s"] <= 50.5
    assert speed.data["fraction_of_bound"] < 0.3
    assert speed.data["ttft_s"] >= 0.05
    assert set(speed.data["concurrency_tok_s"]) == {3}
    assert "bandwidth bound" in speed.summary


def test_bound_skipped_with_reason_for_an_unknown_config(standin, tmp_path):
    missing = str(tmp_path / "missing" / "config.json")
    options = replace(FAST, concurrency=(1,), roofline=RooflineInputs(missing, "H100"))
    speed = verify(standin().url, options).check("speed")
    assert speed.status == "pass"
    assert any(line.startswith(f"no bandwidth bound for {missing!r}") for line in speed.evidence)


@pytest.mark.parametrize("behaviour", ["error_500", "drop_stream", "malformed_json", "hang"])
def test_http_faults_fail_generating_checks_with_reasons(standin, behaviour):
    server = standin(behaviour=behaviour)
    report = verify(server.url, replace(FAST, timeout_s=0.3))
    s = statuses(report)
    assert s["liveness"] == "pass"
    for name in ("determinism", "degenerate", "reasoning", "tools", "warm", "speed"):
        assert s[name] == "fail", name
        assert "\n" not in report.check(name).summary


def test_unreachable_endpoint_fails_liveness_and_skips_the_rest(standin):
    server = standin()
    url = server.url
    server.shutdown()
    server.server_close()
    report = verify(url, FAST)
    assert report.check("liveness").status == "fail"
    assert "cannot connect" in report.check("liveness").summary
    assert {c.status for c in report.checks[1:]} == {"skip"}


def test_model_not_served(standin):
    report = verify(standin(model="Qwen/Qwen3.6-27B").url, replace(FAST, model="other/model"))
    liveness = report.check("liveness")
    assert liveness.status == "fail"
    assert liveness.evidence == ["/v1/models lists ['Qwen/Qwen3.6-27B']"]


def test_reference_identical_passes_and_divergence_fails(standin):
    # The reference is the same model with speculation off.
    reference = standin(speculative=False)
    ok = verify(standin().url, replace(FAST, reference_url=reference.url)).check("reference")
    assert ok.status == "pass"
    assert ok.evidence[0].startswith("count: identical, 59 tokens")  # tokens from logprobs
    # spec_diverge keeps 5 tokens of the greedy answer ("1" "," " " "2" ","), then appends
    # " however, ..." whose first token " " is also the reference's 6th: tokens differ at 6.
    bad = verify(standin(behaviour="spec_diverge").url, replace(FAST, reference_url=reference.url))
    reference_check = bad.check("reference")
    assert reference_check.status == "fail"
    assert reference_check.data["first_difference"] == 6


def test_reference_without_logprobs_compares_words():
    # A server that rejects logprobs with HTTP 400 is asked again without them.
    import httpx

    from servefit.verify.checks.base import CheckContext
    from servefit.verify.checks.reference import run as run_reference
    from servefit.verify.client import EndpointClient

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        body = __import__("json").loads(request.content)
        if body.get("logprobs"):
            return httpx.Response(400, json={"message": "logprobs not supported"})
        message = {"role": "assistant", "content": "one two three"}
        return httpx.Response(
            200,
            json={"model": "m", "choices": [{"message": message, "finish_reason": "stop"}]},
        )

    transport = httpx.MockTransport(handler)
    ctx = CheckContext(
        client=EndpointClient("http://a", transport=transport),
        options=FAST,
        model="m",
        reference=EndpointClient("http://b", transport=transport),
    )
    outcome = run_reference(ctx)
    assert outcome.status == "pass"
    assert outcome.evidence == ["count: identical, 3 words", "explain: identical, 3 words"]


def test_generation_is_sized_to_a_short_context(standin):
    # A real vLLM 0.32.0 server with --max-model-len 512 lists it in /v1/models and answers
    # max_tokens=1024 with HTTP 400 ("max_tokens=1024 cannot be greater than max_model_len=512.
    # Please request fewer output tokens."); verify's defaults must fit inside that context.
    server = standin(engine="vllm", max_model_len=512)
    report = verify(server.url, replace(FAST, max_tokens=1024, concurrency=(1,)))
    assert report.check("liveness").evidence[1] == (
        "max_model_len 512: each request's max_tokens is capped to fit it"
    )
    for check in report.checks:
        assert "HTTP 400" not in " ".join([check.summary, *check.evidence]), check
    assert statuses(report)["degenerate"] == "pass"


def test_a_server_without_tool_parser_skips_tool_calling(standin):
    # vLLM without --enable-auto-tool-choice answers HTTP 400 '"auto" tool choice requires
    # --enable-auto-tool-choice and --tool-call-parser to be set': nothing to check, not a fault.
    report = verify(standin(engine="vllm", tool_parser=False).url, replace(FAST, concurrency=(1,)))
    tools = report.check("tools")
    assert tools.status == "skip"
    assert tools.summary.startswith("the server has no tool-call parser")
    assert '"auto" tool choice requires --enable-auto-tool-choice' in tools.evidence[0]
    assert report.ok
