"""Speed of `servefit plan`: one plan in-process, and the CLI as a whole process.

    python benchmarks/bench_plan.py            # prints a table; numbers go into README.md

Targets (issue: core plan): in-process median < 5 ms; whole process median < 0.6 s on 2 cores.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

SEED_ARGS = dict(
    tp_size=2,
    context_length=32768,
    speculative_algorithm="NEXTN",
    speculative_num_steps=3,
    speculative_eagle_topk=1,
    speculative_num_draft_tokens=4,
    mem_fraction_static=0.88,
    max_running_requests=16,
    mamba_full_memory_ratio=0.5,
)
SEED_CMD = [
    "plan",
    "--gpu",
    "A6000",
    "--engine",
    "sglang==0.5.9",
    "--format",
    "json",
    "--",
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "Qwen/Qwen3.6-27B",
    "--tp-size",
    "2",
    "--context-length",
    "32768",
    "--speculative-algo",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--mem-fraction-static",
    "0.88",
    "--max-running-requests",
    "16",
    "--mamba-full-memory-ratio",
    "0.5",
]


def in_process(n: int = 500) -> dict[str, float]:
    from servefit._plan.planner import PlanRequest, plan

    out = {}
    for engine in ("sglang==0.5.9", "sglang==0.5.23"):
        req = PlanRequest(
            model="Qwen/Qwen3.6-27B", gpu="A6000", engine=engine, args=dict(SEED_ARGS)
        )
        t0 = time.perf_counter()
        plan(req)  # first plan: loads the catalog config and imports the profile
        out[f"{engine} first plan (cold, ms)"] = (time.perf_counter() - t0) * 1e3
        times = []
        for _ in range(n):
            t = time.perf_counter()
            plan(req)
            times.append(time.perf_counter() - t)
        out[f"{engine} plan median (ms)"] = statistics.median(times) * 1e3
        from servefit.model.inventory import load_model

        spec_req = PlanRequest(
            model=load_model("Qwen/Qwen3.6-27B"), gpu="A6000", engine=engine, args=dict(SEED_ARGS)
        )
        times = []
        for _ in range(n):
            t = time.perf_counter()
            plan(spec_req)
            times.append(time.perf_counter() - t)
        out[f"{engine} plan median, model preloaded (ms)"] = statistics.median(times) * 1e3
    return out


def whole_process(n: int = 15) -> dict[str, float]:
    exe = [sys.executable, "-m", "servefit.cli.main"]
    times, bare = [], []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(exe + SEED_CMD, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # the floor, same run
        bare.append(time.perf_counter() - t)
    median, floor = statistics.median(times), statistics.median(bare)
    return {
        "servefit plan process median (s)": median,
        "servefit plan process max (s)": max(times),
        "bare python -c pass median (s)": floor,
        "ratio to a bare python start": median / floor,
    }


def main() -> None:
    import os

    results = {**in_process(), **whole_process()}
    print(f"cpus={os.cpu_count()} python={sys.version.split()[0]}")
    for k, v in results.items():
        print(f"{k:45s} {v:10.3f}")


if __name__ == "__main__":
    main()
