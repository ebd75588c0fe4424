"""fit with vLLM's levers: the user's model on 2x RTX A6000 (vLLM 0.33.0, MTP with 3 speculative
tokens, 32K context), and the club612 launch (vLLM 0.24.0, RTX 5090) as a baseline.

Every candidate is a plan() of the vLLM profile; the tests check that the printed commands are
`vllm serve` commands vLLM's own flag table reads without error, that they re-plan to the
candidate's outcome, and the rules the search follows (context fixed at the target, headroom
beyond vLLM's budget, lossy dtypes only when allowed, the baseline's prefix caching kept).
"""

from __future__ import annotations

import json

import pytest

from servefit._explain.outcome import outcome
from servefit._fit.search import FitRequest, fit
from servefit._plan.planner import PlanRequest, plan
from servefit.engines.vllm.flags import load_flags, parse_argv

MTP = {"method": "mtp", "num_speculative_tokens": 3}
SEED = {"tensor_parallel_size": 2, "max_model_len": 32768, "speculative_config": MTP}


def seed_fit(qwen36, **kw):
    return fit(
        FitRequest(
            model=qwen36,
            gpu="A6000",
            num_gpus=2,
            context=32768,
            spec="mtp",
            engine="vllm==0.33.0",
            model_path="Qwen/Qwen3.6-27B",
            **kw,
        )
    )


@pytest.fixture(scope="module")
def qwen36():
    from servefit.model.inventory import load_model

    return load_model("Qwen/Qwen3.6-27B")


@pytest.fixture(scope="module")
def against_default(qwen36):
    # the baseline is vLLM's own defaults for this launch (utilization 0.92, 256 sequences)
    return seed_fit(qwen36, baseline=dict(SEED))


def test_commands_are_vllm_serve_and_replan_to_the_same_outcome(against_default, qwen36):
    r = against_default
    assert r.engine == "vllm==0.33.0" and r.profile == "0.33.0" and r.min_free_gib == 1.0
    for c in r.best:
        (cmd,) = c.commands
        assert cmd.argv[:3] == ["vllm", "serve", "Qwen/Qwen3.6-27B"]
        assert cmd.shell.startswith("vllm serve Qwen/Qwen3.6-27B \\\n    --tensor-parallel-size 2")
        parsed = parse_argv(load_flags("0.33.0"), cmd.argv[2:])
        assert not parsed.errors and not parsed.unknown
        args = {k: v for k, v in parsed.values.items() if k not in ("model_tag", "host", "port")}
        assert args == c.args
        assert args["max_model_len"] == 32768 and args["speculative_config"] == MTP
        replanned = outcome(
            plan(PlanRequest(model=qwen36, gpu="A6000", engine="vllm==0.33.0", args=args)), 32768
        )
        assert replanned == c.outcome
        # what is left beyond vLLM's budget
        assert c.outcome.free_gib >= 1.0


def test_best_beats_vllms_defaults(against_default):
    r = against_default
    base, best = r.baseline, r.best[0]
    assert base.outcome.verdict == "ok" and base.outcome.max_running_requests == 256
    assert best.outcome.effective_concurrency > base.outcome.effective_concurrency
    assert best.outcome.kv_tokens >= base.outcome.kv_tokens and r.beats_baseline
    # the flags it changes are vLLM's memory levers, nothing else
    assert best.changed_flags and all(
        f.split()[0] in ("--gpu-memory-utilization", "--max-num-seqs") for f in best.changed_flags
    )
    floors = [int(c.outcome.effective_concurrency) for c in r.best]
    assert floors == sorted(floors, reverse=True)
    assert {s.lever for s in r.sweeps} == {"gpu_memory_utilization", "max_num_seqs"}


def test_lossy_dtypes_and_prefix_caching_only_when_allowed(against_default, qwen36):
    plain = {k for c in against_default.best for k in c.args}
    assert not plain & {"kv_cache_dtype", "mamba_ssm_cache_dtype", "enable_prefix_caching"}
    r = seed_fit(qwen36, allow_lossy=True, allow_no_radix=True, top=1)
    best = r.best[0]
    assert (
        best.outcome.effective_concurrency > against_default.best[0].outcome.effective_concurrency
    )
    # both lossy dtypes and prefix caching off (1 + 3 state blocks per group instead of 2 + 3)
    assert best.args["enable_prefix_caching"] is False
    assert best.outcome.state_slots_per_request == 1 + 3
    assert "--no-enable-prefix-caching" in best.commands[0].argv
    assert {"kv_cache_dtype", "mamba_ssm_cache_dtype"} <= set(best.args)


def test_two_nodes_use_vllms_multi_node_flags(qwen36):
    """vllm/config/parallel.py:ParallelConfig nnodes / node_rank / master_addr / master_port
    (multiprocessing backend); vllm/entrypoints/cli/serve.py:run_headless on the other nodes."""
    r = seed_fit(qwen36, nodes=2, top=1, dist_init_addr="10.0.0.1:29501")
    assert {n.tp_size * n.pp_size for n in r.layouts} == {4}
    head, worker = r.best[0].commands
    for n in (head, worker):
        i = n.argv.index("--nnodes")
        assert n.argv[i : i + 8] == [
            "--nnodes",
            "2",
            "--node-rank",
            str(n.node_rank),
            "--master-addr",
            "10.0.0.1",
            "--master-port",
            "29501",
        ]
        parsed = parse_argv(load_flags("0.33.0"), n.argv[2:])
        assert not parsed.errors and not parsed.unknown
    assert "--headless" in worker.argv and "--headless" not in head.argv
    assert "--port" in head.argv and "--port" not in worker.argv


def test_club612_baseline_keeps_its_prefix_caching():
    """The logged launch (tests/explain/test_vllm_club612.py) as the baseline: it chose prefix
    caching and fp8 KV; candidates keep the prefix caching, and with --allow-lossy search the
    dtypes. Its --max-num-batched-tokens 8192 had no effect (the encoder's profiling peak)."""
    from tests.explain.test_vllm_club612 import ARGS

    r = fit(
        FitRequest(
            model="nvidia/Qwen3.6-35B-A3B-NVFP4",
            gpu="RTX 5090",
            num_gpus=1,
            context=131072,
            engine="vllm==0.24.0",
            allow_lossy=True,
            baseline={**ARGS, "port": 8001},
        )
    )
    assert r.profile == "0.24.0"
    base = r.baseline
    assert base.outcome.effective_concurrency == 1  # max_num_seqs 1
    assert "--max-num-batched-tokens 8192" in base.ineffective_flags
    for c in r.best:
        assert c.args["enable_prefix_caching"] is True
        assert c.args["limit_mm_per_prompt"] == {"image": 2, "audio": 0}  # planned and kept
        argv = c.commands[0].argv
        assert argv[argv.index("--port") + 1] == "8001"
        assert argv[argv.index("--limit-mm-per-prompt") + 1] == json.dumps(
            {"image": 2, "audio": 0}, separators=(",", ":")
        )
    assert r.best[0].outcome.effective_concurrency > 1 and r.beats_baseline


def test_cli_fit_reads_a_vllm_launch_as_the_baseline(capsys):
    from servefit.cli.main import main

    argv = [
        "fit",
        "--gpu",
        "A6000",
        "--top",
        "1",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3.6-27B",
        "-tp",
        "2",
        "--max-model-len",
        "32768",
        "--speculative-config",
        json.dumps(MTP),
        "--reasoning-parser",
        "qwen3",
    ]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    r = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0
    # engine, model, GPUs, context and speculation came from the launch command
    assert r["engine"] == "vllm" and r["profile"] == "0.33.0"
    assert (r["gpus_per_node"], r["context"], r["spec"]) == (2, 32768, "mtp")
    assert r["baseline"]["args"]["speculative_config"] == MTP
    argv_best = r["best"][0]["commands"][0]["argv"]
    assert argv_best[:3] == ["vllm", "serve", "Qwen/Qwen3.6-27B"]
    assert argv_best[argv_best.index("--reasoning-parser") + 1] == "qwen3"
