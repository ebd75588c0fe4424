"""Speed of `servefit fit` on the user's case, of a failing plan's fix search, and of `explain`.

    python benchmarks/bench_fit.py            # prints a table; numbers go into README.md

Targets (issue 23): fit >= 10,000 candidates/s on the seed case (Qwen3.6-27B, 2x A6000, MTP,
32K context, SGLang 0.5.9), every candidate a full plan(); a failing plan's fix search (what
`servefit plan` prints under FAILS) <= 30 ms in-process. Each figure is the median of RUNS
timed runs after one untimed run (the first imports the engine profile and builds the model).
This machine's speed drifts by 30 % within minutes, so a bare `python -c pass` start is timed
between the runs and every figure is also given as a multiple of it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

RUNS = 7
SEED = dict(
    tp_size=2,
    context_length=32768,
    speculative_algorithm="NEXTN",
    speculative_num_steps=3,
    speculative_eagle_topk=1,
    speculative_num_draft_tokens=4,
)
HAND = dict(max_running_requests=16, mamba_full_memory_ratio=0.5, mem_fraction_static=0.88)
FIT_CASES = (
    # label, engine, concurrency, extra FitRequest fields (the SGLang ones start from the seed's
    # hand-tuned launch as the baseline to beat)
    ("seed, sglang 0.5.9, --concurrency 16", "sglang==0.5.9", 16, {"baseline": {**SEED, **HAND}}),
    ("seed, sglang 0.5.9", "sglang==0.5.9", None, {"baseline": {**SEED, **HAND}}),
    (
        "seed, sglang 0.5.9, --allow-lossy",
        "sglang==0.5.9",
        16,
        {"baseline": {**SEED, **HAND}, "allow_lossy": True},
    ),
    ("seed, sglang 0.5.23, --concurrency 16", "sglang==0.5.23", 16, {"baseline": {**SEED, **HAND}}),
    ("seed, vllm 0.33.0, --concurrency 16", "vllm==0.33.0", 16, {}),
)
# (label, engine, args): launches that fail, as `servefit plan` gets them
FIX_CASES = (
    ("seed --mem-fraction-static 0.85", "sglang==0.5.9", {**SEED, "mem_fraction_static": 0.85}),
    (
        "vllm 0.33.0 TP 2 --gpu-memory-utilization 0.6",
        "vllm==0.33.0",
        {"tensor_parallel_size": 2, "max_model_len": 32768, "gpu_memory_utilization": 0.6},
    ),
    ("sglang 0.5.9 TP 1 (no flag fixes it: GPUs)", "sglang==0.5.9", {"tp_size": 1}),
    (
        "vllm 0.33.0 TP 1 (no flag fixes it: GPUs)",
        "vllm==0.33.0",
        {"tensor_parallel_size": 1, "max_model_len": 32768},
    ),
)


def bare_start() -> float:
    """Seconds of one bare Python start: the machine's speed at this moment."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t


def _timed(fn, runs: int) -> tuple[list[float], list[float], object]:
    """(run seconds, bare starts between them, the last result) of `fn`, after one warm-up."""
    result = fn()
    times, bare = [], []
    for _ in range(runs):
        bare.append(bare_start())
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, bare, result


def bench_fit(runs: int = RUNS) -> list[tuple[str, int, float, float, float, str]]:
    from servefit._fit.search import FitRequest, fit

    rows = []
    for label, engine, conc, extra in FIT_CASES:
        request = FitRequest(
            model="Qwen/Qwen3.6-27B",
            gpu="A6000",
            num_gpus=2,
            context=32768,
            concurrency=conc,
            spec="mtp",
            engine=engine,
            **extra,
        )
        times, bare, result = _timed(lambda r=request: fit(r), runs)
        median = statistics.median(times)
        best = result.best[0]  # type: ignore[attr-defined]
        o = best.outcome
        summary = (
            f"{' '.join(best.changed_flags)} -> {o.kv_tokens:,} KV tokens, "
            f"{o.max_running_requests} running, eff. {o.effective_concurrency:g}"
        )
        n = result.candidates_evaluated  # type: ignore[attr-defined]
        rows.append((label, n, median, n / median, median / statistics.median(bare), summary))
    return rows


def bench_fix(runs: int = RUNS) -> list[tuple[str, int, float, float]]:
    """The fix `servefit plan` searches under a failing launch (_explain/analysis.py:fix_request),
    the plan itself made beforehand."""
    from servefit._explain.analysis import fix_request
    from servefit._plan.planner import PlanRequest, plan

    rows = []
    for label, engine, args in FIX_CASES:
        request = PlanRequest(model="Qwen/Qwen3.6-27B", gpu="A6000", engine=engine, args=args)
        base = plan(request)
        assert base.verdict == "fail", label
        times, bare, fix = _timed(lambda r=request, b=base: fix_request(r, b), runs)
        median = statistics.median(times)
        rows.append((label, fix.tried, median, median / statistics.median(bare)))  # type: ignore[attr-defined]
    return rows


def bench_explain(runs: int = 5) -> list[tuple[str, float, float]]:
    from servefit._explain.analysis import explain_request
    from servefit._plan.planner import PlanRequest

    out = []
    for label, extra in (
        ("explain seed --mem-fraction-static 0.85 (with fix)", {"mem_fraction_static": 0.85}),
        ("explain hand-tuned launch", HAND),
    ):
        request = PlanRequest(
            model="Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", args={**SEED, **extra}
        )
        times, bare, _ = _timed(lambda r=request: explain_request(r), runs)
        median = statistics.median(times)
        out.append((label, median, median / statistics.median(bare)))
    return out


def main() -> None:
    print(f"cpus={os.cpu_count()} python={sys.version.split()[0]} runs={RUNS} (medians)")
    print(f"bare python -c pass (s) {statistics.median(bare_start() for _ in range(RUNS)):.4f}")
    print(f"{'fit case':40s} {'candidates':>10s} {'median s':>9s} {'cand/s':>8s} {'x bare':>7s}  best")
    for label, n, secs, rate, ratio, best in bench_fit():
        print(f"{label:40s} {n:10,d} {secs:9.3f} {rate:8,.0f} {ratio:7.1f}  {best}")
    print(f"{'fix search of a failing plan':46s} {'plans':>6s} {'median ms':>10s} {'x bare':>7s}")
    for label, tried, secs, ratio in bench_fix():
        print(f"{label:46s} {tried:6d} {secs * 1e3:10.1f} {ratio:7.2f}")
    for label, secs, ratio in bench_explain():
        print(f"{label:52s} {secs:9.3f} s {ratio:7.1f} x bare")


if __name__ == "__main__":
    main()
