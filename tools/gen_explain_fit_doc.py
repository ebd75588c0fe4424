"""Regenerate docs/explain-fit.md: run the documented commands and paste their real output,
then append the JSON schemas of Explanation and FitResult.

    python tools/gen_explain_fit_doc.py

tests/explain/test_doc_schemas.py checks that the schemas in the doc are current.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "explain-fit.md"
SEED = (
    "python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp-size 2 "
    "--context-length 32768 --speculative-algo NEXTN --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
)
HAND = "--max-running-requests 16 --mamba-full-memory-ratio 0.5 --mem-fraction-static 0.88"
VLLM_SEED = (
    "vllm serve Qwen/Qwen3.6-27B --tensor-parallel-size 2 --max-model-len 32768 "
    """--speculative-config '{"method":"mtp","num_speculative_tokens":3}'"""
)


def run(cmd: str, section: str | None = None) -> str:
    env = {**os.environ, "COLUMNS": "110", "NO_COLOR": "1", "TERM": "dumb"}
    exe = str(Path(sys.executable).parent / "servefit")
    proc = subprocess.run(
        cmd.replace("servefit ", exe + " ", 1), shell=True, capture_output=True, text=True, env=env
    )
    out = proc.stdout.rstrip()
    if section:
        out = out[out.index(section) :]
    lines = "\n".join(line.rstrip() for line in out.splitlines())
    return f"```console\n$ {cmd}\n{lines}\n```\n(exit status {proc.returncode})"


def schema(model) -> str:
    return json.dumps(model.model_json_schema(), indent=1, sort_keys=True)


def main() -> None:
    from servefit._explain.schema import Explanation
    from servefit._fit.schema import FitResult

    text = TEMPLATE.format(
        explain_085=run(
            f"servefit explain --gpu A6000 --engine sglang==0.5.9 -- {SEED} "
            "--mem-fraction-static 0.85"
        ),
        explain_hand=run(
            f"servefit explain --gpu A6000 --engine sglang==0.5.9 --no-fix -- {SEED} {HAND}",
            section="Your flags",
        ),
        explain_hand_23=run(
            f"servefit explain --gpu A6000 --engine sglang==0.5.23 --no-fix -- {SEED} {HAND}",
            section="Your flags",
        ),
        fit_seed=run(
            f"servefit fit --gpu A6000 --engine sglang==0.5.9 --concurrency 16 -- {SEED} "
            f"--reasoning-parser qwen3 {HAND}"
        ),
        fit_nodes=run(
            "servefit fit Qwen/Qwen3.6-27B --gpu A6000 --num-gpus 2 --nodes 2 "
            "--context 65536 --spec mtp --engine sglang==0.5.9 --top 1 "
            "--dist-init-addr 10.0.0.1:5000"
        ),
        vllm_1024=run(f"servefit explain --gpu A6000 -- {VLLM_SEED} --max-num-seqs 1024"),
        vllm_default=run(f"servefit explain --gpu A6000 --no-fix -- {VLLM_SEED}", section="Levers"),
        vllm_fit=run(
            f"servefit fit --gpu A6000 --concurrency 16 -- {VLLM_SEED} --reasoning-parser qwen3"
        ),
        vllm_nodes=run(
            "servefit fit Qwen/Qwen3.6-27B --gpu A6000 --num-gpus 2 --nodes 2 "
            "--context 65536 --spec mtp --engine vllm==0.33.0 --top 1 "
            "--dist-init-addr 10.0.0.1:29501"
        ),
        hand=HAND,
        explanation_schema=schema(Explanation),
        fit_schema=schema(FitResult),
    )
    DOC.write_text(text)
    print(f"wrote {DOC}")


TEMPLATE = """\
# `servefit explain` and `servefit fit`

`plan` says whether a launch starts. `explain` says **which memory, which consumer and which
flag**: the consumers per rank with the formula and the numbers that produced them, what every
lever of that engine release does (computed by re-planning, never from a rule table), which of
your flags had no effect and why, and for a failing launch the fix. `fit` searches
parallelism and flags for the best launch command.

Every number below is the output of the commands as shown (regenerate this page with
`python tools/gen_explain_fit_doc.py`).

## Terms

* **Effective concurrency at context L** = `min(max running requests, KV tokens / L)`: the
  number of requests of length L that run at the same time. The engine may admit more
  requests (its `max_running_requests`), but at full length only `KV tokens / L` fit; and no
  more than `max_running_requests` run however large the KV pool is.
* **Headroom** (`outcome.free_gib`). SGLang: the predicted free memory after all pools and the
  draft model (`per_rank.free_gib`), what is left for activations and CUDA graphs; fixes and
  fit candidates must leave `--min-free-gib`, default 2 GiB (the ground-truth logs show
  0.03–0.93 GiB for graph capture). vLLM: its budget (`total x gpu_memory_utilization`) already
  holds the profiled activation peak and the CUDA-graph estimate, so the headroom is what is
  left beyond all of it (`per_rank.free_gib` less the activation peak: the free memory at
  start-up less the requested memory, plus the part of the budget no whole block fits); the
  default `--min-free-gib` is 1 GiB (vLLM's own default of 0.92 leaves 1.4 GiB on an L4 and
  10.6 GiB on an H200 by servefit's model of the memory at start-up).
* **Stranded**: state-pool slots no running request can use (`max_mamba_cache_size` beyond
  running x slots per request), and KV tokens beyond `running x L` that no request can reach.
* **No effect**: re-planning the launch with every tried value of the flag leaves the verdict,
  every pool and the concurrency unchanged. The reason is derived from the plan itself: the
  engine overrode the value (its own `Change` record), or the plan shows the flag is not read
  (for the ratio: the state pool's sizing branch is not the ratio branch; for vLLM's
  `--mamba-block-size`: Mamba cache mode align replaces it with the attention block size), or
  the launch fails on a consumer the flag does not size. A flag whose every tried value the
  engine rejects (vLLM's `--mamba-block-size` without prefix caching) has no effect too, and
  says so.

## explain: the user's case, `--mem-fraction-static 0.85` (SGLang 0.5.9)

{explain_085}

What it says:

* It fails because the **speculative mamba state** (48 requests, reset from none for
  speculative decoding, x 4 draft tokens x 76,972,032 B = 13.76 GiB) plus the state pool
  (48 slots, 3.44 GiB) exceed the 14.61 GiB budget. Raising `--mem-fraction-static` alone needs
  0.92 and leaves room for about one 32K request.
* `--mamba-full-memory-ratio` has **no effect** in 0.5.9 here: speculative decoding disables
  the radix cache, so the state pool is sized from `max_running_requests`, and the ratio is
  never read.
* The best fix is one flag, `--max-running-requests 12` (10 whole 32K requests at once, the
  most of any single flag, and 12 running; 11 holds the same 10 whole requests with one fewer
  running). The change closest to what was asked is the user's own flag, the nearest value that
  starts with one full-context request at once: `--mem-fraction-static 0.93` (0.92 starts but
  holds 0.71 of one). The best pair reaches 13.

## explain: the hand-tuned launch, which flags mattered

The seed's fix was `{hand}`. In 0.5.9 the ratio did not matter:

{explain_hand}

The same launch in 0.5.23, where the ratio sizes the state pool and the state pool caps the
running requests below 16:

{explain_hand_23}

## fit: the user's case, compared with the hand-tuned launch

The launch command after `--` is the baseline; it also supplies the model, GPU count,
context and speculative settings, and its other flags (`--reasoning-parser`) are kept in the
printed commands.

{fit_seed}

## fit: two nodes

`--num-gpus` is per node; the layouts use all `num-gpus x nodes` GPUs and each candidate gets
one command per node.

{fit_nodes}

## explain with vLLM: the same model and GPUs, vLLM 0.33.0

The same catalogue mechanism with vLLM's levers (`servefit/_explain/levers_vllm.py`, built from
the profile's `servefit/engines/vllm/levers.py`). On a 47.6 GiB A6000 vLLM's own default is 256
sequences (`get_batch_defaults`: under 70 GiB), which starts; `--max-num-seqs 1024` (the default
on 70 GiB and larger GPUs) does not: FULL decode CUDA graphs need one Mamba block per sequence,
and 1,024 sequences also raise the sampler's profiling peak, which shrinks the pool.

{vllm_1024}

The default launch, its levers and flags:

{vllm_default}

What it says:

* The KV pool binds: 558 blocks of 800 tokens, each 32K request holding 41 attention blocks
  and 3 GDN groups x 5 state blocks (Mamba cache mode align: 2 + 3 speculative tokens).
* `--mamba-block-size` has **no effect**: with prefix caching on (0.33.0's default for hybrids)
  vLLM sets it to the attention block size. Prefix caching off frees one state block per group
  (1 + 3), at the price of prefix caching.
* `--max-num-batched-tokens` has **no effect**: the profiling run's peak is the sampler's
  (256 sequences x the vocabulary), not the forward pass.

## fit with vLLM

vLLM's search space: TP x PP over the GPUs, `--max-num-seqs`, `--gpu-memory-utilization`
(`--max-model-len` is the target context), with `--allow-lossy` also `--kv-cache-dtype
fp8_e4m3` and `--mamba-ssm-cache-dtype bfloat16`, with `--allow-no-radix` also
`--no-enable-prefix-caching`. A launch command after `--` is read with vLLM's own flags; the
baseline's prefix-caching choice is kept in every candidate, and its other flags are planned
and kept.

{vllm_fit}

Across nodes, vLLM (0.24.0 and 0.33.0) runs TP / PP with its multiprocessing backend: every node
runs the same `vllm serve` with `--nnodes N --node-rank R --master-addr HOST --master-port PORT`
(`vllm/config/parallel.py:ParallelConfig`; `--dist-init-addr HOST:PORT` gives both), and every
node but the first adds `--headless` (`vllm/entrypoints/cli/serve.py:run_headless`: workers only,
no API server).

{vllm_nodes}

## How the search works

* **explain** re-plans each lever of the engine release (`servefit/_explain/levers.py`: the
  catalogue lists each lever's engine attribute per release and generates candidate values
  from the current plan): `--mem-fraction-static`, `--max-running-requests`,
  `--mamba-full-memory-ratio`, `--max-mamba-cache-size`, `--mamba-ssm-dtype`, speculative
  steps / draft tokens / off, `--context-length`, `--kv-cache-dtype`, `--chunked-prefill-size`,
  the decode CUDA-graph batch size, the radix cache, the mamba scheduler (0.5.9) / radix-cache
  (0.5.23) strategy, and TP / PP (the same GPUs, and twice as many; the fix searches every
  count). For vLLM
  (`servefit/_explain/levers_vllm.py`): `--gpu-memory-utilization`, `--max-num-seqs`,
  `--max-model-len`, `--max-num-batched-tokens`, `--kv-cache-dtype`, `--mamba-ssm-cache-dtype`,
  `--speculative-config.num_speculative_tokens` and speculative decoding off,
  `--enable-prefix-caching`, `--mamba-block-size`, and TP / PP. Then each flag you set is
  re-planned without it. `servefit/_explain/catalogue.py` picks the plan's engine's catalogue;
  nothing else in explain, fix or fit depends on the engine.
* **fix** (`servefit/_explain/fix.py`): every fix value of every lever alone, then (explain
  only; `plan` prints single flags) pairs of the levers that moved anything (coarse grids,
  refined one flag at a time). A candidate counts only if it starts with `--min-free-gib` of
  headroom, holds at least one request of its context at once, and keeps `--concurrency`
  running requests when given. Two are reported: the **closest** to what was asked (a flag the
  user set first, then the smallest relative change; integer settings are bisected between the
  value asked and the nearest grid value that starts, so the exact nearest value is found) and
  the **best** (the most whole full-context requests at once, then more running requests, then
  less context given up, more KV tokens, more headroom). Lossy levers (KV / SSM dtype) only
  with `--allow-lossy`; speculative settings and the radix cache / prefix caching are not used;
  contexts only shrink. When no single flag starts, or the weights alone exceed the memory free
  before they load, the GPU count is searched count by count (every TP x PP layout of each
  count, not doubling) for the smallest one that starts. `servefit doctor` proposes the same
  fix, searched on the replay calibrated with the log's measurements (for vLLM: "Model loading
  took"); without a config it works the fix back from the log's own numbers (SGLang's
  `total_rest_memory`, vLLM's printed estimate of the longest context).
* **fit** (`servefit/_fit/search.py`): for each TP x PP layout using all GPUs, (with
  `--allow-lossy` also FP8 KV and BF16 SSM state; with `--allow-no-radix` also radix cache off),
  for `max_running_requests` in engine default, 1..32, 36..256, for the state-pool sizing
  (engine's own; `--max-mamba-cache-size` = running x slots per request, so no slot is
  stranded; or a ratio), `--mem-fraction-static` from the engine default and 0.70..0.97 until the
  headroom drops under `--min-free-gib`. Every candidate is a full plan; past 8,000 plans
  (many layouts, lossy variants) both grids are thinned evenly. Ranking
  (`servefit/_fit/rank.py`): meets `--concurrency`; effective concurrency (capped at
  `--concurrency`, whole requests); headroom (0.5 GiB steps); fewer changed flags; more KV
  tokens. The best of each family (layout x set of changed flags) is shown. vLLM
  (`servefit/_fit/space.py`): for each layout, (lossy / prefix-caching variants), for
  `max_num_seqs` in engine default, 1..16, 20..64, 80..1024, `--gpu-memory-utilization` from
  the engine default and 0.80..0.98 until the headroom drops under `--min-free-gib`.
  Effective concurrency uses vLLM's own count at the target context (blocks / blocks per
  request, Mamba blocks included).

## Python API

```python
import servefit

seed = dict(tp_size=2, context_length=32768, speculative_algorithm="NEXTN",
            speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)
e = servefit.explain("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9",
                     mem_fraction_static=0.85, **seed)            # -> Explanation
e.plan.error_consumer                  # 'speculative mamba state'
e.fix.best.command_flags               # '--max-running-requests 12'
e.fix.minimal.command_flags            # '--mem-fraction-static 0.93'
[lv.reason for lv in e.levers if lv.name == "mamba_full_memory_ratio"]

r = servefit.fit("Qwen/Qwen3.6-27B", gpu="A6000", num_gpus=2, context=32768, concurrency=16,
                 spec="mtp", engine="sglang==0.5.9",
                 baseline="--tp-size 2 --max-running-requests 16 --mem-fraction-static 0.88")
r.best[0].changed_flags                # ['--max-running-requests 16', '--mem-fraction-static 0.92']
print(r.best[0].commands[0].shell)     # the launch command, ready to paste
```

`servefit.plan/explain/fit` also accept a ready `PlanRequest`. Results are frozen dataclasses
with pydantic's `model_dump` / `model_dump_json` / `model_copy` / `model_json_schema`
(servefit/records.py); `--format json` prints `model_dump_json()`; `--html FILE` writes one
self-contained page (plotly.js inlined; `pip install 'servefit[html]'`) with the per-rank memory
as stacked bars and effective concurrency against each lever.

## JSON schema: `servefit explain --format json` (`Explanation`)

```json
{explanation_schema}
```

## JSON schema: `servefit fit --format json` (`FitResult`)

```json
{fit_schema}
```
"""

if __name__ == "__main__":
    main()
