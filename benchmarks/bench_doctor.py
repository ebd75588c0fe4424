"""Speed of `servefit doctor`'s log reading (doctor/launches.py:read_log), in one process.

    python benchmarks/bench_doctor.py [MB]     # prints a table; numbers go into README.md

Two logs are written to a temporary directory, both made of lines SGLang 0.5.9 prints (the
f-strings filled in, as in tests/doctor/logs/build_seed_logs.py):

* serving: the start-up of tests/doctor/logs/sglang_0_5_9_seed_088_serve.log, then MB
  megabytes (default 200) of what a busy server prints at default settings -- an access line,
  a prefill line and decode lines per request, every one of which doctor reads;
* restart loop: 100,000 launches of an engine that runs out of memory loading its weights,
  restarted by a service manager each time (5 lines per launch);
* real start-ups: every real log in the repository (tests/data/engine-logs/: vLLM 0.24.0 and
  0.32.0 on the CPU, starting, serving and failing; tests/doctor/logs/: SGLang 0.5.9) one after
  the other, repeated to 100 MB: a file of thousands of launches in which most lines are
  start-up lines doctor reads, the densest real text it meets.

Target (issue 23): >= 50 MB/s on mixed real logs, on 2 cores. Each figure is the median of
three runs, in CPU seconds of the reading process; a bare `python -c pass` start is timed
between the runs (the machine's speed drifts) and each figure is also given as a multiple of it.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE = ROOT / "tests" / "doctor" / "logs" / "sglang_0_5_9_seed_088_serve.log"
REAL_LOGS = sorted((ROOT / "tests" / "data" / "engine-logs").glob("*.log")) + sorted(
    (ROOT / "tests" / "doctor" / "logs").glob("*.log")
)
SERVING_KEYS = ("Decode batch", "Prefill batch", "HTTP/1.1")
LAUNCHES = 100_000
# one launch of the restart loop (model_runner.py:init_torch_distributed / load_model, the
# caching allocator's error, and SGLang's parent process noticing its child died)
RESTART = (
    "[2026-04-20 10:02:{s:02d} TP0] Init torch distributed begin.\n"
    "[2026-04-20 10:02:{s:02d} TP0] Init torch distributed ends. elapsed=1.02 s, mem usage=0.61 GB\n"
    "[2026-04-20 10:02:{s:02d} TP0] Load weight begin. avail mem=46.93 GB\n"
    "[2026-04-20 10:02:{s:02d} TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "1.00 GiB. GPU 0 has a total capacity of 47.40 GiB of which 512.00 MiB is free.\n"
    "[2026-04-20 10:02:{s:02d}] Received sigquit from a child process. It usually means the child "
    "failed.\n"
)


def serving_log(path: Path, megabytes: int) -> None:
    lines = SERVE.read_text(encoding="utf-8").splitlines(keepends=True)
    ready = next(i for i, ln in enumerate(lines) if "fired up and ready" in ln)
    serving = [ln for ln in lines[ready:] if any(k in ln for k in SERVING_KEYS)]
    target = megabytes << 20
    with path.open("w", encoding="utf-8") as fh:
        fh.writelines(lines)
        size, block = 0, "".join(serving)
        while size < target:
            fh.write(block)
            size += len(block)


def restart_log(path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(LAUNCHES):
            fh.write(RESTART.format(s=i % 60))


def real_logs(path: Path, megabytes: int = 100) -> None:
    blob = b"".join(p.read_bytes() for p in REAL_LOGS)
    path.write_bytes(blob * ((megabytes << 20) // len(blob) + 1))


def timed(path: Path) -> tuple[float, object]:
    from servefit.doctor.launches import read_log

    t0 = time.process_time()  # CPU seconds: the machine is shared, wall time is not ours
    facts = read_log(path)
    return time.process_time() - t0, facts


def bare_start() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp:
        serve, restart = Path(tmp) / "serving.log", Path(tmp) / "restart.log"
        real = Path(tmp) / "real.log"
        serving_log(serve, megabytes)
        restart_log(restart)
        real_logs(real)
        rows = []
        bare: list[float] = []
        for name, path in (("serving", serve), ("restart loop", restart), ("real start-ups", real)):
            runs = []
            for _ in range(3):
                bare.append(bare_start())
                runs.append(timed(path))
            secs = statistics.median(r[0] for r in runs)
            facts = runs[-1][1]
            mb = path.stat().st_size / 2**20
            rows.append((name, mb, facts.lines, facts.launches_total, secs, mb / secs))  # type: ignore[attr-defined]
    floor = statistics.median(bare)
    print(f"bare python -c pass (s) {floor:.4f}")
    print(f"{'log':<16}{'MB':>6}{'lines':>12}{'launches':>10}{'seconds':>9}{'MB/s':>8}{'x bare':>8}")
    for name, mb, lines, launches, secs, rate in rows:
        print(
            f"{name:<16}{mb:>6.0f}{lines:>12,}{launches:>10,}{secs:>9.2f}{rate:>8.1f}"
            f"{secs / floor:>8.0f}"
        )


if __name__ == "__main__":
    main()
