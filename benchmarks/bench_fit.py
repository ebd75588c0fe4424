"""Speed of `servefit fit` on the user's case, and of `servefit explain`.

    python benchmarks/bench_fit.py            # prints a table; numbers go into README.md

Target (issue 3): at least 2,000 candidates in under 2 s for the seed case
(Qwen3.6-27B, 2x A6000, MTP, 32K context, SGLang 0.5.9). Every candidate is a full plan().
"""

from __future__ import annotations

import os
import statistics
import sys
import time

SEED = dict(
    tp_size=2,
    context_length=32768,
    speculative_algorithm="NEXTN",
    speculative_num_steps=3,
    speculative_eagle_topk=1,
    speculative_num_draft_tokens=4,
)
HAND = dict(max_running_requests=16, mamba_full_memory_ratio=0.5, mem_fraction_static=0.88)
CASES = (
    # label, engine, concurrency, extra FitRequest fields
    ("seed, sglang 0.5.9, --concurrency 16", "sglang==0.5.9", 16, {}),
    ("seed, sglang 0.5.9", "sglang==0.5.9", None, {}),
    ("seed, sglang 0.5.9, --allow-lossy", "sglang==0.5.9", 16, {"allow_lossy": True}),
    ("seed, sglang 0.5.23, --concurrency 16", "sglang==0.5.23", 16, {}),
)


def bench_fit(runs: int = 3) -> list[tuple[str, int, float, float, str]]:
    from servefit._fit.search import FitRequest, fit

    rows = []
    for label, engine, conc, extra in CASES:
        times, result = [], None
        for _ in range(runs):
            t0 = time.perf_counter()
            result = fit(
                FitRequest(
                    model="Qwen/Qwen3.6-27B",
                    gpu="A6000",
                    num_gpus=2,
                    context=32768,
                    concurrency=conc,
                    spec="mtp",
                    engine=engine,
                    baseline={**SEED, **HAND},
                    **extra,
                )
            )
            times.append(time.perf_counter() - t0)
        best = result.best[0]
        o = best.outcome
        summary = (
            f"{' '.join(best.changed_flags)} -> {o.kv_tokens:,} KV tokens, "
            f"{o.max_running_requests} running, eff. {o.effective_concurrency:g}"
        )
        rows.append(
            (
                label,
                result.candidates_evaluated,
                statistics.median(times),
                result.candidates_evaluated / statistics.median(times),
                summary,
            )
        )
    return rows


def bench_explain(runs: int = 5) -> list[tuple[str, float]]:
    from servefit._explain.analysis import explain_request
    from servefit._plan.planner import PlanRequest

    out = []
    for label, extra in (
        ("explain seed --mem-fraction-static 0.85 (with fix)", {"mem_fraction_static": 0.85}),
        ("explain hand-tuned launch", HAND),
    ):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            explain_request(
                PlanRequest(
                    model="Qwen/Qwen3.6-27B",
                    gpu="A6000",
                    engine="sglang==0.5.9",
                    args={**SEED, **extra},
                )
            )
            times.append(time.perf_counter() - t0)
        out.append((label, statistics.median(times)))
    return out


def main() -> None:
    print(f"cpus={os.cpu_count()} python={sys.version.split()[0]}")
    print(f"{'fit case':40s} {'candidates':>10s} {'median s':>9s} {'cand/s':>8s}  best")
    for label, n, secs, rate, best in bench_fit():
        print(f"{label:40s} {n:10,d} {secs:9.3f} {rate:8,.0f}  {best}")
    for label, secs in bench_explain():
        print(f"{label:52s} {secs:9.3f} s")


if __name__ == "__main__":
    main()
