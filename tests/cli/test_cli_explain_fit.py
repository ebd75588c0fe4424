"""`servefit explain` and `servefit fit` as a user runs them: JSON, tables, exit codes, errors."""

from __future__ import annotations

import json

from tests.clihelp import run
from tests.seedcase import HAND_TUNED_ARGV, SEED_ARGV, SEED_TARGET_ARGV


def test_explain_json_seed_085(capsys):
    code, out, _ = run(
        capsys,
        "explain",
        *SEED_TARGET_ARGV,
        "--format",
        "json",
        "--",
        *SEED_ARGV,
        "--mem-fraction-static",
        "0.85",
    )
    e = json.loads(out)
    assert code == 1
    assert e["plan"]["error_consumer"] == "speculative mamba state"
    ratio = next(lv for lv in e["levers"] if lv["name"] == "mamba_full_memory_ratio")
    assert ratio["effect"] == "no effect"
    assert e["fix"]["best"]["command_flags"] == "--max-running-requests 12"
    assert e["fix"]["minimal"]["command_flags"] == "--mem-fraction-static 0.93"
    assert "concurrency_loss" not in e["fix"]["best"]  # ranking internals are not reported


def test_explain_table_hand_tuned(capsys):
    code, out, _ = run(
        capsys,
        "explain",
        *SEED_TARGET_ARGV,
        "--",
        *SEED_ARGV,
        *HAND_TUNED_ARGV,
    )
    assert code == 0
    assert "Memory consumers per rank" in out and "Your flags" in out
    assert "never read" in out  # the ratio flag's reason


def test_fit_json_with_baseline_from_the_launch_command(capsys):
    code, out, _ = run(
        capsys,
        "fit",
        *SEED_TARGET_ARGV,
        "--concurrency",
        "16",
        "--top",
        "2",
        "--format",
        "json",
        "--",
        *SEED_ARGV,
        *HAND_TUNED_ARGV,
    )
    r = json.loads(out)
    assert code == 0
    # MODEL, --num-gpus, --context and --spec came from the launch command
    assert r["model"] == "Qwen/Qwen3.6-27B" and r["gpus_per_node"] == 2
    assert r["context"] == 32768 and r["spec"] == "mtp"
    assert r["beats_baseline"] is True
    shell = r["best"][0]["commands"][0]["shell"]
    # the user's non-memory flags are kept in the command servefit prints, --host included
    # because the user passed it (SEED_ARGV has --host 0.0.0.0)
    assert "--reasoning-parser qwen3" in shell and "--port 30000" in shell
    assert "--host 0.0.0.0" in shell


def test_fit_table_side_by_side(capsys):
    code, out, _ = run(
        capsys,
        "fit",
        *SEED_TARGET_ARGV,
        "--concurrency",
        "16",
        "--top",
        "1",
        "--",
        *SEED_ARGV,
        *HAND_TUNED_ARGV,
    )
    assert code == 0
    assert "Your launch vs servefit's best" in out and "flags with no effect" in out
    assert "python -m sglang.launch_server" in out


def test_fit_errors_are_one_line(capsys):
    code, _, err = run(
        capsys,
        "fit",
        "Qwen/Qwen3.6-27B",
        "--gpu",
        "A6000",
        "--num-gpus",
        "2",
        "--context",
        "32768",
        "--spec",
        "eagle3",
    )
    assert code == 2
    assert (
        err.strip()
        == "servefit: error: --spec eagle3 needs --draft-model PATH (the draft checkpoint)"
    )
    code, _, err = run(
        capsys, "fit", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--context", "32768", "--nodes", "2"
    )
    assert code == 2 and err.startswith("servefit: error: pass --num-gpus")
    assert "Traceback" not in err


def test_fit_picks_the_gpu_count(capsys):
    """Without --num-gpus, the smallest count on which a launch starts: Qwen3.6-27B in bf16
    (25.48 GiB of weights per GPU at TP 2, 50.96 at TP 1) does not fit one 47.2 GiB A6000."""
    code, out, _ = run(
        capsys, "fit", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--context", "32768",
        "--engine", "sglang==0.5.9", "--format", "json", "--top", "1",
    )  # fmt: skip
    r = json.loads(out)
    assert code == 0 and r["gpus_per_node"] == 2
    assert r["gpus_note"].startswith("--num-gpus picked: 2") and "need 2" in r["gpus_note"]


def test_fit_nothing_starts_exits_1(capsys):
    code, out, _ = run(
        capsys,
        "fit",
        "Qwen/Qwen3.6-27B",
        "--gpu",
        "A6000",
        "--num-gpus",
        "1",
        "--context",
        "32768",
        "--engine",
        "sglang==0.5.9",
    )
    assert code == 1 and "nothing starts" in out


def test_fit_takes_context_length_as_plan_spells_it(capsys):
    """`--context-length` (plan's and SGLang's spelling) and `--context` are the same option."""
    argv = ("fit", "Qwen/Qwen3-8B", "--gpu", "A6000", "--num-gpus", "1", "--top", "1",
            "--engine", "sglang==0.5.9", "--format", "json")  # fmt: skip
    results = []
    for spelling in ("--context-length", "--context"):
        code, out, _ = run(capsys, *argv, spelling, "8192")
        assert code == 0
        results.append(json.loads(out))
    assert results[0]["best"][0]["commands"] == results[1]["best"][0]["commands"]
    assert results[0]["context"] == 8192


def test_json_errors_are_an_object_on_stdout_and_one_line_on_stderr(capsys):
    code, out, err = run(
        capsys, "fit", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--context-length", "32768",
        "--nodes", "2", "--format", "json",
    )  # fmt: skip
    assert code == 2
    obj = json.loads(out)
    assert obj["exit"] == 2 and obj["error"].startswith("pass --num-gpus")
    assert err.strip() == f"servefit: error: {obj['error']}"
    # a value click's own type refuses
    code, out, err = run(capsys, "fit", "Qwen/Qwen3.6-27B", "--top", "abc", "--format", "json")
    assert code == 2
    assert json.loads(out) == {"error": "--top must be an integer, got 'abc'", "exit": 2}
    assert err.strip() == "servefit: error: --top must be an integer, got 'abc'"


def test_html_without_plotly_fails_before_the_search(capsys, monkeypatch):
    import importlib.util

    import servefit._fit.search as search

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a)
    )

    def no_search(*_a, **_k):
        raise AssertionError("the search ran before the dependency check")

    monkeypatch.setattr(search, "fit", no_search)
    code, out, err = run(
        capsys, "fit", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--num-gpus", "2",
        "--context-length", "32768", "--html", "out.html",
    )  # fmt: skip
    assert code == 1 or code == 2
    assert err.strip() == (
        "servefit: error: --html needs the plotly package: pip install 'servefit[html]' "
        "(or pip install plotly)"
    )
    assert out == ""
