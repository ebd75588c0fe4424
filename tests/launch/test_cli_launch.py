"""`servefit launch / runs / logs / stop` as a user runs them, with the seed's real launch command.

`python -m sglang.launch_server` resolves to the stand-in engine through the test shim
(tests/standin/shim, first on the engine's PYTHONPATH): the stand-in prints SGLang 0.5.9's lines
and serves the OpenAI API; it is not SGLang. The supervisor is the real detached process
(`python -m servefit.launch.watch`)."""

from __future__ import annotations

import pytest

from servefit.launch.rundir import list_runs
from tests.clihelp import run
from tests.launch.conftest import PYTHON, REPO, SHIM, free_port, wait_for
from tests.launch.test_preflight import SEED_ERROR
from tests.seedcase import HAND_TUNED_ARGV, SEED_SIZING_ARGV, SEED_TARGET_ARGV

SEED = [PYTHON, "-m", "sglang.launch_server", *SEED_SIZING_ARGV]
FAST = ["--probe-interval", "0.05", "--settle", "0.3", "--probe-timeout", "2", "--grace", "3"]


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    from servefit.hardware import nvml

    monkeypatch.setattr(nvml, "local_gpus", lambda: nvml.LocalGPUs(reason="NVML library not found"))


def launch_args(runs_root, port: int, *extra: str, fault: str = "none") -> list[str]:
    return [
        "launch",
        *SEED_TARGET_ARGV,
        "--runs-dir",
        str(runs_root),
        "--env",
        f"PYTHONPATH={SHIM}:{REPO}",
        "--env",
        f"STANDIN_FAULT={fault}",
        *FAST,
        *extra,
        "--",
        *SEED,
        "--port",
        str(port),
    ]


def test_a_launch_predicted_to_fail_is_refused_and_nothing_starts(capsys, runs_root):
    code, out, _ = run(
        capsys, *launch_args(runs_root, free_port()), "--mem-fraction-static", "0.85"
    )
    flat = " ".join(out.split())
    assert code == 1
    assert f"predicted to fail (sglang 0.5.9 rules): {SEED_ERROR}" in flat
    assert "not launched: 1 check failed; fix it or launch anyway with --force" in flat
    assert list_runs(runs_root) == []


def test_ready_then_runs_logs_and_stop(capsys, runs_root):
    port = free_port()
    code, out, _ = run(capsys, *launch_args(runs_root, port), *HAND_TUNED_ARGV)
    assert code == 0, out
    [run_dir] = list_runs(runs_root)
    rec = run_dir.read()
    flat = " ".join(out.split())
    assert rec.state == "ready" and rec.forced is False and rec.plan_verdict == "ok"
    assert (
        f"ready after {rec.timings.time_to_ready_s:.1f} s: http://127.0.0.1:{port} serving Qwen/Qwen3.6-27B"
        in flat
    )
    # the stand-in prints 333,712 KV tokens; the plan of this command predicts 337,294 (README)
    assert "KV tokens 333,712 (planned 337,294, -1.1 %)" in flat
    assert "state slots 16 (as planned)" in flat
    assert (run_dir.path / "plan.json").is_file() and (run_dir.path / "argv.json").is_file()
    env = run_dir.read_json(run_dir.env_path)
    assert env["SERVEFIT_RUN_ID"] == run_dir.id and env["STANDIN_FAULT"] == "none"

    code, out, _ = run(capsys, "runs", "--runs-dir", str(runs_root))
    assert code == 0 and run_dir.id in out and " ready " in out

    code, out, _ = run(capsys, "logs", run_dir.id, "-n", "1", "--runs-dir", str(runs_root))
    assert code == 0 and out.strip().endswith("The server is fired up and ready to roll!")

    code, out, _ = run(capsys, "stop", "--runs-dir", str(runs_root))  # the only active run
    assert code == 0
    assert f"{run_dir.id}: sent SIGTERM; the engine was killed by SIGKILL" in out
    assert "(SGLang ends its own process tree with SIGKILL once SIGTERM has drained it)" in out
    assert "port closed" in out
    assert wait_for(lambda: run_dir.read().state == "stopped", 10)

    code, out, _ = run(capsys, "stop", run_dir.id, "--runs-dir", str(runs_root))
    assert code == 0 and out.strip() == f"{run_dir.id}: not running (stopped)"


def test_stop_all_stops_every_running_run_and_nothing_else(capsys, runs_root):
    ports = [free_port(), free_port()]
    for port in ports:
        code, out, _ = run(capsys, *launch_args(runs_root, port), *HAND_TUNED_ARGV)
        assert code == 0, out
    runs = list_runs(runs_root)
    assert len(runs) == 2
    code, _, err = run(capsys, "stop", "--runs-dir", str(runs_root))
    assert code == 2
    assert "several runs are running" in err and "or pass --all" in err
    code, _, err = run(capsys, "stop", runs[0].id, "--all", "--runs-dir", str(runs_root))
    assert code == 2 and err.strip() == "servefit: error: give a RUN or --all, not both"

    code, out, _ = run(capsys, "stop", "--all", "--runs-dir", str(runs_root))
    assert code == 0, out
    for r in runs:
        assert f"{r.id}: sent SIGTERM" in out
    assert out.count("port closed") == 2
    assert wait_for(lambda: all(r.read().state == "stopped" for r in runs), 10)
    code, out, _ = run(capsys, "stop", "--all", "--runs-dir", str(runs_root))
    assert code == 0 and out.strip() == "no run is running"


def test_forced_launch_fails_as_predicted_and_prints_the_diagnosis(capsys, runs_root):
    code, out, _ = run(
        capsys,
        *launch_args(runs_root, free_port(), "--force", fault="startup-oom"),
        "--mem-fraction-static",
        "0.85",
    )
    flat = " ".join(out.split())
    assert code == 1
    [run_dir] = list_runs(runs_root)
    rec = run_dir.read()
    assert rec.state == "failed" and rec.forced and rec.plan_verdict == "fail"
    assert rec.exit_signal == "SIGKILL"
    assert f"failed: the engine was killed by SIGKILL while allocating: {SEED_ERROR}" in flat
    text = " ".join(run_dir.diagnosis_path.read_text().split())
    assert "diagnosis" in out and "RuntimeError: Not enough memory." in text


def test_the_doctor_diagnoses_the_runs_own_log_with_its_numbers(capsys, runs_root):
    pytest.importorskip("servefit.doctor.diagnose")
    code, _, _ = run(
        capsys,
        *launch_args(runs_root, free_port(), "--force", fault="startup-oom"),
        "--mem-fraction-static",
        "0.85",
    )
    assert code == 1
    [run_dir] = list_runs(runs_root)
    rec = run_dir.read()
    # the stand-in printed 46.92 GiB free before weights and 25.51 GiB of weights; outside the
    # static fraction: 46.92 x (1 - 0.85) = 7.04 GiB; left for the pools 46.92 - 25.51 - 7.04 = 14.37
    assert rec.diagnosis.startswith(
        "SGLang sized the KV cache at zero tokens under --mem-fraction-static 0.85: of 46.92 GiB "
        "free before the weights, the weights took 25.51 GiB and 7.04 GiB stays outside the static "
        "fraction, so 14.37 GiB was left"
    )
    text = " ".join(run_dir.diagnosis_path.read_text().split())
    assert "consumer: speculative mamba state" in text  # replayed with sglang==0.5.9 on A6000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["launch", "--gpu", "A6000"], "servefit: error: no launch command: put it after `--`"),
        (
            ["launch", "--ready-timeout", "0", "--", "vllm", "serve", "m"],
            "servefit: error: --ready-timeout must be positive, got 0",
        ),
        (
            [
                "launch",
                "--gpu",
                "NoSuchGPU",
                "--",
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "Qwen/Qwen3.6-27B",
            ],
            "servefit: error: ",
        ),
        (["stop", "nosuchrun"], "servefit: error: no run"),
        (["logs"], "servefit: error: no runs under"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, runs_root, argv, message):
    code, out, err = (
        run(capsys, *argv, "--runs-dir", str(runs_root))
        if "--" not in argv
        else run(
            capsys,
            *argv[: argv.index("--")],
            "--runs-dir",
            str(runs_root),
            *argv[argv.index("--") :],
        )
    )
    assert code == 2
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err


def test_ctrl_c_while_starting_stops_the_engine(capsys, runs_root, monkeypatch):
    import servefit.launch.attach as attach

    real_sleep = attach.time.sleep
    fired = []

    def interrupt_once(seconds: float) -> None:
        runs = list_runs(runs_root)
        if not fired and runs and runs[0].read().state == "loading_weights":
            fired.append(True)  # Ctrl-C while the weights load (30 s in this run)
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(attach.time, "sleep", interrupt_once)
    code, out, _ = run(
        capsys,
        *launch_args(
            runs_root, free_port(), "--env", "STANDIN_WEIGHT_LOAD_S=30", fault="slow-weight-load"
        ),
        *HAND_TUNED_ARGV,
    )
    assert code == 130 and "interrupted (Ctrl-C): stopping the engine" in out
    [run_dir] = list_runs(runs_root)
    assert wait_for(lambda: run_dir.read().state == "stopped", 10)
    rec = run_dir.read()
    assert rec.stop.by == "Ctrl-C during start-up" and rec.stop.signals == ["SIGTERM"]
    assert rec.timings.ready is None


def test_a_ready_start_calibrates_the_next_plan(capsys, runs_root):
    """The supervisor records what the start measured once it is ready; the stand-in's
    "Load weight begin. avail mem=46.92 GB" and "mem usage=25.51 GB" (SGLANG_NUMBERS, made up,
    not a measurement) are what the store then holds, and what the next plan takes."""
    from servefit.calibration import store
    from tests.standin.engine import SGLANG_NUMBERS

    port = free_port()
    code, out, _ = run(capsys, *launch_args(runs_root, port), *HAND_TUNED_ARGV)
    assert code == 0, out
    [run_dir] = list_runs(runs_root)
    assert wait_for(lambda: run_dir.read().calibration is not None, 30)
    (entry,) = store.load()[0]
    assert entry.id == run_dir.read().calibration
    assert entry.source == str(run_dir.path) and entry.source_kind == "launch"
    assert entry.measured.free_before_weights_gib == SGLANG_NUMBERS["avail_before"]
    assert entry.measured.weights_gib == SGLANG_NUMBERS["weights"]
    run(capsys, "stop", run_dir.id, "--runs-dir", str(runs_root))
    code, out, _ = run(
        capsys, "plan", *SEED_TARGET_ARGV, "--", *SEED, *HAND_TUNED_ARGV, "--port", str(port)
    )
    assert code == 0 and out.splitlines()[1].startswith(f"calibrated from {run_dir.path}, ")
    # and the next launch's preflight plans with it
    code, out, _ = run(capsys, *launch_args(runs_root, free_port()), *HAND_TUNED_ARGV)
    assert code == 0 and "rules, calibrated from" in " ".join(out.split())
    assert run_dir.id in "".join(out.split())  # the recorded run, whatever the terminal folds
    for r in list_runs(runs_root):
        run(capsys, "stop", r.id, "--runs-dir", str(runs_root))


def test_no_record_leaves_the_store_empty(capsys, runs_root):
    from servefit.calibration import store

    code, out, _ = run(
        capsys, *launch_args(runs_root, free_port(), "--no-record"), *HAND_TUNED_ARGV
    )
    assert code == 0, out
    [run_dir] = list_runs(runs_root)
    run(capsys, "stop", run_dir.id, "--runs-dir", str(runs_root))
    assert run_dir.read().calibration is None and store.load()[0] == []
