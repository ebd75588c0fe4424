"""The calibration loop end to end: `servefit doctor LOG` records, plan uses, the store is
listed, shown and forgotten; bad input is one line.

The seed case (tests/doctor/logs, assembled by build_seed_logs.py from the user's logs): the
0.85 start dies with "Not enough memory"; the 0.88 / 16 / 0.5 start then allocates
"#tokens: 330089" (sglang_0_5_9_seed_088_serve.log). Calibrated on the failed start alone, the
plan of the second must give the second's pool; cold, servefit says 337,294 (+2.2 %).
"""

from __future__ import annotations

import json
import os

import pytest

from servefit.calibration import store
from tests.clihelp import run
from tests.doctor.test_seed_case import CMD_085, CMD_088, FAIL, SERVE

PLAN = ["plan", "-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--engine", "sglang==0.5.9"]
LAUNCH_088 = ["--", *CMD_088.split(" > ")[0].split()[1:]]  # without nohup and the redirect
LOGGED_088 = 330089  # "KV Cache is allocated. #tokens: 330089"


def _doctor(capsys, *extra: str) -> tuple[int, str]:
    code, out, err = run(
        capsys, "doctor", str(FAIL), "--gpu", "A6000", "--command", CMD_085, *extra
    )
    assert err == ""
    return code, out


def _plan(capsys, *extra: str) -> dict:
    code, out, err = run(capsys, *PLAN, "--format", "json", *extra, *LAUNCH_088)
    assert code == 0 and err == "", err
    return json.loads(out)


def test_one_failed_start_makes_the_next_plan_exact(capsys):
    assert f"#tokens: {LOGGED_088}" in SERVE.read_text()
    cold = _plan(capsys)
    assert cold["calibration"] is None and cold["pools"]["max_total_num_tokens"] == 337294
    code, out = _doctor(capsys)
    assert code == 1 and "calibration " in out and " recorded: plan, explain and fit" in out
    (entry,) = store.load()[0]
    assert entry.measured.free_before_weights_gib == 46.93  # TP0's "Load weight begin"
    assert entry.measured.weights_gib == 25.49
    p = _plan(capsys)
    assert p["pools"]["max_total_num_tokens"] == LOGGED_088
    assert p["calibration"]["id"] == entry.id and p["calibrated"] is True
    assert p["calibration"]["differs"] == [
        "mamba_full_memory_ratio: 0.9 -> 0.5",
        "max_running_requests: 48 -> 16",
        "mem_fraction_static: 0.85 -> 0.88",
    ]
    assert _plan(capsys, "--no-calibration")["pools"]["max_total_num_tokens"] == 337294


def test_the_table_says_so_on_its_second_line(capsys):
    _doctor(capsys)
    code, out, _ = run(capsys, *PLAN, *LAUNCH_088)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("STARTS")
    assert lines[1].startswith(f"calibrated from {FAIL}, ")
    assert "free memory before the weights 46.93 GiB; weights 25.49 GiB" in out


def test_recording_twice_stores_once_and_no_record_stores_nothing(capsys, tmp_path, monkeypatch):
    _doctor(capsys)
    _, out = _doctor(capsys)
    assert "already recorded" in out and len(os.listdir(store.root())) == 1
    monkeypatch.setenv(store.ENV, str(tmp_path / "other"))
    _doctor(capsys, "--no-record")
    assert not (tmp_path / "other").exists()


def test_list_show_forget(capsys):
    code, out, _ = run(capsys, "calibration", "list")
    assert code == 0 and "no calibration entries" in out
    _doctor(capsys)
    (entry,) = store.load()[0]
    code, out, _ = run(capsys, "calibration", "list", "--format", "json")
    assert code == 0 and [e["id"] for e in json.loads(out)["entries"]] == [entry.id]
    code, out, _ = run(capsys, "calibration", "show", entry.id[:5])
    assert code == 0 and json.loads(out)["measured"]["weights_gib"] == 25.49
    code, out, _ = run(capsys, "calibration", "forget", entry.id)
    assert code == 0 and out.startswith(f"forgot {entry.id}")
    assert store.load()[0] == []


@pytest.mark.parametrize(
    "argv, words",
    [
        (["calibration", "show", "nope"], "no calibration entry 'nope'"),
        (["calibration", "forget", "nope"], "no calibration entry 'nope'"),
    ],
)
def test_a_wrong_id_is_one_line(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_a_broken_file_in_the_store_is_named_and_the_plan_still_runs(capsys):
    _doctor(capsys)
    (store.root() / "broken.json").write_text("{", encoding="utf-8")
    p = _plan(capsys)
    assert p["pools"]["max_total_num_tokens"] == LOGGED_088
    assert any("broken.json: not readable JSON" in w for w in p["warnings"])


def test_no_secret_reaches_the_store(capsys):
    key = "sk-calibration-secret-1234"
    cmd = CMD_085.replace("--port 30000", f"--port 30000 --api-key {key}")
    run(capsys, "doctor", str(FAIL), "--gpu", "A6000", "--command", cmd)
    for name in os.listdir(store.root()):
        assert key not in (store.root() / name).read_text()


def test_fit_sizes_the_recorded_layout_with_it(capsys):
    fit = [
        "fit", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--num-gpus", "2", "--context", "32768",
        "--spec", "mtp", "--concurrency", "16", "--engine", "sglang==0.5.9", "--format", "json",
    ]  # fmt: skip
    _, out, _ = run(capsys, *fit)
    assert all(n["calibrated_from"] is None for n in json.loads(out)["layouts"])
    _doctor(capsys)
    _, out, _ = run(capsys, *fit)
    layouts = {(n["tp_size"], n["pp_size"]): n for n in json.loads(out)["layouts"]}
    assert layouts[(2, 1)]["calibrated_from"].startswith(f"{FAIL}, ")  # the logged TP 2
    assert layouts[(1, 2)]["calibrated_from"] is None  # no start of TP 1 x PP 2 recorded
    _, out, _ = run(capsys, *fit, "--no-calibration")
    assert all(n["calibrated_from"] is None for n in json.loads(out)["layouts"])
