"""fit on the user's case: at least as good as the hand-tuned launch, and its numbers are real."""

from __future__ import annotations

import pytest

from servefit._explain.outcome import outcome
from servefit._fit.search import FitRequest, fit
from servefit._plan.planner import PlanRequest, plan
from servefit.engines.sglang.flags import load_flags, parse_argv
from servefit.model.inventory import load_model
from tests.seedcase import HAND_TUNED, SEED, SEED_FIT


@pytest.fixture(scope="module")
def qwen36():
    return load_model("Qwen/Qwen3.6-27B")


@pytest.fixture(scope="module")
def seed_fit(qwen36):
    return fit(
        FitRequest(
            model=qwen36,
            **SEED_FIT,
            concurrency=16,
            baseline={**SEED, **HAND_TUNED},
            model_path="Qwen/Qwen3.6-27B",
        )
    )


def test_best_beats_the_hand_tuned_launch(seed_fit):
    r = seed_fit
    assert r.candidates_evaluated >= 2000
    base, best = r.baseline, r.best[0]
    assert base.outcome.verdict == "ok" and base.outcome.kv_tokens == 337_294  # planner's figure
    o = best.outcome
    assert o.verdict == "ok" and o.free_gib >= 2.0
    assert o.max_running_requests >= 16 and best.meets_concurrency
    assert o.kv_tokens >= base.outcome.kv_tokens
    assert o.effective_concurrency >= base.outcome.effective_concurrency
    assert r.beats_baseline is True
    # side by side: the hand-tuned ratio is a flag without effect; the best has none
    assert "--mamba-full-memory-ratio 0.5" in base.ineffective_flags
    assert best.ineffective_flags == []
    assert (best.tp_size, best.pp_size) == (2, 1)
    # neither pool stranded: no state slot beyond the running requests, KV below R x context
    assert best.stranded_state_slots == 0 and best.stranded_kv_tokens == 0


def test_best_command_replans_to_the_same_outcome(seed_fit, qwen36):
    best = seed_fit.best[0]
    (cmd,) = best.commands
    argv = cmd.argv
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    # no --host: the engine's default bind address (SGLang: 127.0.0.1, server_args.py:ServerArgs)
    assert "--host" not in argv and "--nnodes" not in argv
    parsed = parse_argv(load_flags("0.5.9"), argv[3:])
    assert not parsed.errors and not parsed.unknown
    args = {k: v for k, v in parsed.values.items() if k not in ("model_path", "host", "port")}
    assert args == best.args
    replanned = outcome(
        plan(PlanRequest(model=qwen36, gpu="A6000", engine="sglang==0.5.9", args=args)), 32768
    )
    assert replanned == best.outcome


def test_ranked_by_effective_concurrency_then_headroom(seed_fit):
    best = seed_fit.best
    assert [c.rank for c in best] == [1, 2, 3]
    floors = [min(int(c.outcome.effective_concurrency), 16) for c in best]
    assert floors == sorted(floors, reverse=True)
    families = {(c.tp_size, c.pp_size, tuple(sorted(c.changed_flags))) for c in best}
    assert len(families) == len(best)


def test_without_concurrency_target_pools_are_balanced(qwen36):
    r = fit(
        FitRequest(
            model=qwen36,
            **SEED_FIT,
            top=1,
        )
    )
    o = r.best[0].outcome
    # running requests ~ what the KV pool holds at full context: neither pool stranded
    assert abs(o.max_running_requests - o.full_context_requests) < 1
    assert o.effective_concurrency >= 12


def test_lossy_search_only_when_allowed(qwen36):
    kw = dict(
        model=qwen36,
        **SEED_FIT,
        concurrency=16,
        top=1,
    )
    plain = fit(FitRequest(**kw))
    lossy = fit(FitRequest(**kw, allow_lossy=True))
    assert "kv_cache_dtype" not in plain.best[0].args
    assert lossy.best[0].outcome.effective_concurrency > plain.best[0].outcome.effective_concurrency
    assert {"kv_cache_dtype", "mamba_ssm_dtype"} & set(lossy.best[0].args)


def test_multi_node_commands(qwen36):
    r = fit(
        FitRequest(
            model=qwen36,
            **SEED_FIT,
            nodes=2,
            top=2,
            dist_init_addr="10.0.0.1:5000",
        )
    )
    assert {n.tp_size * n.pp_size for n in r.layouts} == {4}
    for c in r.best:
        assert [n.node_rank for n in c.commands] == [0, 1]
        for n in c.commands:
            i = n.argv.index("--nnodes")
            assert n.argv[i : i + 6] == [
                "--nnodes",
                "2",
                "--node-rank",
                str(n.node_rank),
                "--dist-init-addr",
                "10.0.0.1:5000",
            ]
        assert "--port" in c.commands[0].argv and "--port" not in c.commands[1].argv


def test_nothing_fits_says_why():
    r = fit(
        FitRequest(
            model="Qwen/Qwen3.6-27B", gpu="A6000", num_gpus=1, context=32768, engine="sglang==0.5.9"
        )
    )
    assert r.best == [] and r.note and "nothing starts" in r.note


def test_dense_model_single_gpu():
    r = fit(
        FitRequest(
            model="meta-llama/Meta-Llama-3.1-8B",
            gpu="A6000",
            num_gpus=1,
            context=8192,
            engine="sglang==0.5.9",
            top=1,
        )
    )
    best = r.best[0]
    assert best.outcome.verdict == "ok" and best.outcome.effective_concurrency > 10
    assert best.changed_flags in (
        [],
        [f"--mem-fraction-static {best.args['mem_fraction_static']:g}"],
    )


@pytest.mark.parametrize(
    "spec,error", [("eagle3", "needs --draft-model"), ("bogus", "unknown --spec")]
)
def test_bad_spec_is_one_clear_error(qwen36, spec, error):
    from servefit.errors import ArgumentError

    with pytest.raises(ArgumentError, match=error):
        fit(FitRequest(model=qwen36, gpu="A6000", num_gpus=2, context=32768, spec=spec))
