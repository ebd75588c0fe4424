"""The supervisor against the stand-in engine (tests/standin/engine.py, a test process that
prints SGLang's and vLLM's start-up lines and serves their API; not an engine): one test per
fault mode, each checking the run's state, its record and the message a user reads.

Expected values come from the stand-in's own printed numbers (SGLANG_NUMBERS / VLLM_NUMBERS),
from the engines' error texts it reproduces (OOM_SGLANG, OOM_VLLM, CUDA_FAULT), and from the
engines' shutdown code cited in its docstring."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

from servefit.launch import procs
from servefit.launch.stop import owned_members, port_open, stop_run
from tests.launch.conftest import FAST, free_port, standin_argv, wait_for
from tests.standin.engine import CUDA_FAULT, OOM_SGLANG, OOM_VLLM, SGLANG_NUMBERS, VLLM_NUMBERS


def test_healthy_sglang_goes_through_every_stage_to_ready_then_stops(supervise):
    port = free_port()
    s = supervise(standin_argv("sglang", port))
    rec = s.wait_state("ready")
    # every stage was entered, in order, and ready was declared only after the probes
    t = rec.timings
    assert t.started <= t.loading_weights <= t.allocating <= t.capturing_graphs <= t.ready
    assert rec.timings.time_to_ready_s == round(t.ready - t.started, 3)
    assert rec.served_model == "Qwen/Qwen3.6-27B"  # /v1/models of the stand-in lists --model-path
    f = rec.facts
    n = SGLANG_NUMBERS
    assert (f.weights_gib, f.kv_tokens, f.mamba_slots) == (
        n["weights"],
        n["kv_tokens"],
        n["mamba_slots"],
    )
    assert f.kv_gib == round(n["k"] + n["v"], 2)  # "K size: 5.09 GB, V size: 5.09 GB"
    assert f.mamba_gib == round(n["conv"] + n["ssm"], 2)
    assert f.spec_state_gib == round(n["inter_ssm"] + n["inter_conv"], 2)
    assert f.engine_says_ready and f.errors == []
    # the engine is a session leader: its process group is its pid, and its TP ranks are in it
    assert rec.pgid == rec.pid and len(owned_members(rec)) == 3  # leader + 2 TP ranks

    result = stop_run(s.run, grace_s=3.0, gpus_fn=lambda: _no_gpus())
    final = s.join()
    assert result.signals == ["SIGTERM"] and not result.escalated
    assert result.port_closed is True and not port_open("127.0.0.1", port)
    assert final.state == "stopped" and final.stop.by == "servefit stop"
    # SGLang drains, then kill_process_tree(os.getpid(), include_parent=True) SIGKILLs itself
    assert final.exit_signal == "SIGKILL" and final.exit_code is None
    assert final.message == "stopped by servefit stop: the engine was killed by SIGKILL"
    assert owned_members(final) == []


def test_slow_weight_load_is_reported_as_loading_weights_and_times_out(supervise):
    # the timeout is the test's move, once the engine is loading its weights (not a race
    # between a short timeout and the stand-in's start-up on a busy machine)
    cfg = FAST.model_copy(update={"ready_timeout_s": 600.0, "grace_s": 2.0})
    s = supervise(
        standin_argv("sglang", free_port(), "slow-weight-load"),
        config=cfg,
        env={"STANDIN_WEIGHT_LOAD_S": "3600"},
    )
    s.wait_state("loading_weights", timeout=120)
    s.advance(601)
    final = s.join(timeout=120)
    assert "loading_weights" in s.states
    assert final.state == "failed"
    assert final.message.startswith(
        "not ready after 600 s (engine: loading weights; last probe: GET /health: "
    )
    assert final.timings.allocating is None  # "Load weight end" never came
    # a start-up that failed is stopped by the supervisor (it holds the GPUs), not left behind
    assert final.stop.by == "not ready in time" and final.stop.signals == ["SIGTERM"]
    # still loading: the stand-in has no SIGTERM handler yet (it installs its drain once serving)
    assert final.exit_signal == "SIGTERM"
    assert final.message.endswith("; the engine was killed by SIGTERM")
    assert owned_members(final) == []


def test_slow_weight_load_with_enough_time_becomes_ready(supervise):
    s = supervise(
        standin_argv("sglang", free_port(), "slow-weight-load"),
        env={"STANDIN_WEIGHT_LOAD_S": "0.6"},
    )
    rec = s.wait_state("ready")
    assert "loading_weights" in s.states
    # the stand-in sleeps 0.6 s between "Load weight begin" and "Load weight end"
    assert rec.timings.allocating - rec.timings.loading_weights > 0.4


def test_startup_memory_error_is_captured_with_the_engines_text(supervise):
    s = supervise(
        standin_argv("sglang", free_port(), "startup-oom", "--mem-fraction-static", "0.85")
    )
    final = s.join()
    error = OOM_SGLANG.format(mfs=0.85)
    assert error == (  # SGLang 0.5.9 model_runner_kv_cache_mixin.py:init_memory_pool, verbatim
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: self.server_args.mem_fraction_static=0.85"
    )
    assert final.state == "failed"
    assert final.exit_signal == "SIGKILL"  # the launch-phase SIGQUIT handler kills the tree
    assert final.message == f"the engine was killed by SIGKILL while allocating: {error}"
    assert final.facts.errors == [error]  # TP0 and TP1 print the same line: kept once
    assert final.timings.ready is None and final.timings.capturing_graphs is None
    text = s.run.diagnosis_path.read_text()
    assert error in text and final.diagnosis
    assert owned_members(final) == []


def test_crash_after_the_first_request_is_caught_before_ready(supervise):
    s = supervise(standin_argv("sglang", free_port(), "crash-after-first-request"))
    final = s.join()
    assert final.state == "failed" and "ready" not in s.states
    assert final.exit_signal == "SIGKILL"
    assert final.message == (
        f"the engine was killed by SIGKILL right after answering its first request: {CUDA_FAULT}"
    )
    assert final.facts.engine_says_ready  # the log said "fired up": only the probe caught it
    assert CUDA_FAULT in s.run.diagnosis_path.read_text()


def test_hung_health_check_fails_after_the_ready_timeout(supervise):
    cfg = FAST.model_copy(update={"ready_timeout_s": 600.0, "probe_timeout_s": 0.2})
    s = supervise(standin_argv("sglang", free_port(), "hung-health"), config=cfg)
    # the engine printed "fired up" and a /health probe went unanswered: then time runs out
    assert wait_for(
        lambda: s.record().facts.engine_says_ready and "no answer" in s.last_probe(), 120
    ), s.log()
    s.advance(601)
    final = s.join(timeout=120)
    assert final.state == "failed" and "ready" not in s.states
    assert final.message.startswith(
        "not ready after 600 s (engine: capturing graphs; last probe: GET /health: no answer within 0.2 s)"
    )
    assert final.facts.engine_says_ready  # the engine printed "fired up", /health never answered
    assert final.stop.by == "not ready in time"
    assert owned_members(final) == []


def test_port_in_use_makes_the_engine_exit_with_the_bind_error(supervise):
    port = free_port()
    s = supervise(standin_argv("sglang", port, "port-in-use"))
    final = s.join()
    bind = (  # uvicorn logs asyncio's OSError (asyncio/base_events.py:create_server)
        f"[Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
        "address already in use"
    )
    assert final.state == "failed" and final.exit_code == 3  # uvicorn's STARTUP_FAILURE
    assert final.message.startswith("the engine exited with code 3 while capturing graphs: ")
    assert final.message.endswith(bind)


def test_an_engine_that_ignores_sigterm_gets_sigkill_after_the_grace_period(supervise):
    s = supervise(standin_argv("sglang", free_port(), "ignore-sigterm"))
    rec = s.wait_state("ready")
    members = owned_members(rec)
    result = stop_run(s.run, grace_s=0.5, gpus_fn=lambda: _no_gpus())
    final = s.join()
    assert result.signals == ["SIGTERM", "SIGKILL"] and result.escalated
    assert final.state == "stopped" and final.exit_signal == "SIGKILL"
    assert final.stop.escalated and final.stop.signals == ["SIGTERM", "SIGKILL"]
    assert not any(procs.is_alive(p) for p in members)


def test_vllm_start_is_followed_and_stops_cleanly(supervise):
    s = supervise(standin_argv("vllm", free_port()), engine="vllm")
    rec = s.wait_state("ready")
    f, n = rec.facts, VLLM_NUMBERS
    assert (f.weights_gib, f.kv_gib, f.kv_tokens) == (n["weights"], n["kv_gib"], n["kv_tokens"])
    assert f.context_len == 32768 and f.max_concurrency == round(n["kv_tokens"] / 32768, 2)
    assert rec.timings.capturing_graphs is not None  # the tqdm line ends with \r, still read
    stop_run(s.run, grace_s=3.0, gpus_fn=lambda: _no_gpus())
    final = s.join()
    assert final.state == "stopped" and final.exit_code == 0  # uvicorn's graceful shutdown


def test_vllm_startup_memory_error(supervise):
    s = supervise(standin_argv("vllm", free_port(), "startup-oom"), engine="vllm")
    final = s.join()
    assert final.state == "failed" and final.exit_code == 1
    # the root cause (EngineCore) comes before the API server's RuntimeError
    assert final.facts.errors[0] == OOM_VLLM
    assert final.message == f"the engine exited with code 1 while allocating: {OOM_VLLM}"


def test_a_program_that_does_not_exist_fails_cleanly(supervise):
    s = supervise(
        ["/nonexistent/python3", "-m", "sglang.launch_server", "--port", str(free_port())]
    )
    final = s.join()
    assert final.state == "failed" and final.pid is None
    assert final.message == "cannot run /nonexistent/python3: No such file or directory"


def test_each_launch_writes_its_own_fresh_log(supervise):
    a, b = free_port(), free_port()
    first = supervise(standin_argv("sglang", a, "startup-oom"))
    first.join()
    second = supervise(standin_argv("sglang", b, "startup-oom"))
    second.join()
    assert first.run.path != second.run.path
    log_a, log_b = first.log(), second.log()
    assert f"port={a}" in log_a and f"port={b}" not in log_a
    assert f"port={b}" in log_b and f"port={a}" not in log_b


def test_stop_never_signals_a_process_whose_pid_was_reused(runs_root):
    """A record whose pid now belongs to another process (start time differs) is not ours."""
    from servefit.launch.command import parse_launch
    from servefit.launch.supervisor import prepare_run

    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        run = prepare_run(runs_root, parse_launch(["python", "-m", "sglang.launch_server"]))
        with run.update() as rec:
            rec.pid = rec.pgid = other.pid
            rec.pid_start_ticks = (procs.start_ticks(other.pid) or 0) + 1  # a different process
            rec.state = "ready"
        result = stop_run(run, grace_s=0.1, port_timeout_s=0.1, gpus_fn=_no_gpus)
        assert not result.was_running and result.signals == []
        assert procs.is_alive(other.pid)  # untouched
        # the run's engine had ended before, unobserved: not a stop (liveness.settle)
        assert run.read().state == "failed"
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()


def test_port_open_helper_sees_a_listener():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        assert port_open("127.0.0.1", port)
    assert wait_for(lambda: not port_open("127.0.0.1", port), 2)


def _no_gpus():
    from servefit.hardware.nvml import LocalGPUs

    return LocalGPUs(reason="NVML library not found (no NVIDIA driver on this machine)")


def test_an_engine_that_stops_answering_after_ready_is_marked_failed(supervise):
    s = supervise(
        standin_argv("sglang", free_port()), config=FAST.model_copy(update={"probe_timeout_s": 0.2})
    )
    rec = s.wait_state("ready")
    os.kill(rec.pid, signal.SIGSTOP)  # frozen: alive, but nothing answers
    try:
        failed = s.wait_state("failed")
        assert failed.message == (
            "the engine stopped answering: 2 health checks in a row failed "
            "(GET /health: no answer within 0.2 s)"
        )
        assert failed.exit_code is None and failed.exit_signal is None  # still running
        assert wait_for(lambda: s.run.diagnosis_path.exists(), 10)
    finally:
        os.kill(rec.pid, signal.SIGCONT)
    stop_run(s.run, grace_s=3.0, gpus_fn=_no_gpus)
    final = s.join()
    assert final.state == "failed"  # it failed before it was stopped; the exit is appended
    assert final.message.endswith("; the engine was killed by SIGKILL")


def test_an_engine_that_dies_after_ready_is_recorded_with_its_signal(supervise):
    s = supervise(standin_argv("sglang", free_port()))
    rec = s.wait_state("ready")
    members = owned_members(rec)
    os.kill(rec.pid, signal.SIGKILL)  # the leader only: its TP ranks are left behind
    final = s.join()
    assert final.state == "failed" and final.exit_signal == "SIGKILL"
    assert final.message.startswith("the engine was killed by SIGKILL ")
    assert final.message.endswith(" s after it became ready")
    # the ranks it forked were ours and would hold GPU memory: cleaned up and recorded
    assert sorted(final.leftover_pids) == sorted(p for p in members if p != rec.pid)
    assert not any(procs.is_alive(p) for p in members)
