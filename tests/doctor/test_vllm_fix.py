"""doctor on a vLLM start-up failure: the fix is explain's minimal fix, searched with vLLM's
levers on the replay calibrated with the log's "Model loading took".

The log is the user's model on 2x RTX A6000 under vLLM 0.33.0 with `--max-num-seqs 1024`. No
real log of that launch exists: the lines are in vLLM 0.33.0's own formats (the f-strings of
startup.py:log_version_and_model / non-default args, gpu_model_runner.py:load_model,
gpu_worker.py:determine_available_memory, kv_cache_utils.py, and the ValueError of
compilation.py:resolve_cudagraph_mode_and_sizes) carrying the numbers servefit predicts for it.
What is tested is that doctor reads them, replays and proposes the same fix as explain.
"""

from __future__ import annotations

import json

import pytest

from servefit._explain.analysis import explain_request
from servefit._plan.planner import PlanRequest
from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log

MTP = {"method": "mtp", "num_speculative_tokens": 3}
ARGS = {"tensor_parallel_size": 2, "max_model_len": 32768, "max_num_seqs": 1024}
LOG = [
    "(APIServer pid=1) INFO 11-01 10:00:00 [startup.py:38] vLLM server version 0.33.0, serving "
    "model Qwen/Qwen3.6-27B",
    "(APIServer pid=1) INFO 11-01 10:00:00 [startup.py:96] non-default args: {'model_tag': "
    "'Qwen/Qwen3.6-27B', 'model': 'Qwen/Qwen3.6-27B', 'max_model_len': 32768, "
    "'tensor_parallel_size': 2, 'max_num_seqs': 1024, 'speculative_config': {'method': 'mtp', "
    "'num_speculative_tokens': 3}}",
    "(EngineCore pid=90) INFO 11-01 10:01:30 [gpu_model_runner.py:5089] Model loading took "
    "25.92 GiB memory and 80.1 seconds",
    "(EngineCore pid=90) INFO 11-01 10:01:31 [interface.py:1110] Setting attention block size to "
    "800 tokens to ensure that attention page size is >= mamba page size.",
    "(EngineCore pid=90) INFO 11-01 10:02:10 [gpu_worker.py:440] Available KV cache memory: "
    "6.09 GiB",
    "(EngineCore pid=90) INFO 11-01 10:02:11 [kv_cache_utils.py:1300] GPU KV cache size: "
    "136,923 tokens, Maximum concurrency for 32,768 tokens per request: 4.18x",
    "(EngineCore pid=90) ERROR 11-01 10:02:12 [core.py:1100] ValueError: max_num_seqs (1024) "
    "exceeds available Mamba cache blocks (234). Each decode sequence requires one Mamba cache "
    "block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most 234 or "
    "increase gpu_memory_utilization.",
]
CMD = (
    "vllm serve Qwen/Qwen3.6-27B -tp 2 --max-model-len 32768 --max-num-seqs 1024 "
    f"--speculative-config '{json.dumps(MTP)}'"
)


@pytest.fixture(scope="module")
def report():
    return diagnose(read_log(LOG), gpu="A6000", command=CMD)


def test_replay_is_calibrated_with_the_logged_weights(report):
    r = report
    assert r.status == "failed" and r.root_cause.kind == "startup_memory"
    assert r.replay.engine == "vllm==0.33.0"
    assert r.replay.measured_weights_gib == 25.92  # "Model loading took 25.92 GiB"
    assert r.replay.verdict == "fail"
    assert r.root_cause.consumer == "max_num_seqs above the Mamba cache blocks"


def test_fix_is_explains_minimal_fix_on_the_replay(report):
    fix = report.fix
    assert fix.source == "replay"  # not the engine's printed advice
    (change,) = fix.best.changes
    assert (change.arg, change.flag, change.old) == ("max_num_seqs", "--max-num-seqs", 1024)
    calibrated = PlanRequest(
        model="Qwen/Qwen3.6-27B",
        gpu="A6000",
        engine="vllm==0.33.0",
        args={**ARGS, "speculative_config": MTP},
        measured_weights_gib=25.92,
    )
    same = explain_request(calibrated).fix.best
    assert [(c.dest, c.new) for c in same.changes] == [("max_num_seqs", change.new)]
    assert fix.best.kv_tokens == same.outcome.kv_tokens
    # the user's command with that one value replaced: -tp and the JSON kept as written
    assert fix.command == CMD.replace("--max-num-seqs 1024", f"--max-num-seqs {change.new}")
