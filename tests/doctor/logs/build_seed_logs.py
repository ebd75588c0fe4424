"""Write the seed-case fixture logs (SGLang 0.5.9, Qwen3.6-27B, 2x RTX A6000, MTP) in this folder.

Not a test: run it by hand (`python tests/doctor/logs/build_seed_logs.py /path/to/sglang-0.5.9`)
when the fixtures must change; the output is committed.

What is real and what is assumed:
  * every line is an f-string of the 0.5.9 wheel, filled in (the citation is next to each);
  * the `server_args=ServerArgs(...)` dump lists every ServerArgs field of the 0.5.9 wheel in
    declaration order with its default, overridden by the seed launch's resolved values
    (read from the wheel with `ast`, so the field list is the engine's own);
  * the measured figures (free memory before the weights 46.93 / 47.05 GiB, weights 25.49 GiB
    per rank) are assumed values for an RTX A6000 pair; no real log of the seed was kept;
  * the pool lines of the 0.88 launch are what servefit's 0.5.9 profile computes from those
    measurements, so a replay of that fixture matches it by construction (the accuracy of the
    replay is checked on tests/data/ground-truth, not here);
  * the serving part follows the seed's account: one request, MTP accepting every draft token
    (accept len 4.00 of 4, rate 1.00, ~62 tok/s), and the log ending without a word.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = "/root/models/Qwen3.6-27B"
SITE = "/root/ml-env/lib/python3.11/site-packages/sglang/srt"
P = {"TP0": 46.93, "TP1": 47.05}  # Load weight begin. avail mem (assumed)
W = 25.49  # Load weight end ... mem usage (assumed)


def server_args(wheel: Path, overrides: dict) -> str:
    tree = ast.parse((wheel / "sglang/srt/server_args.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    parts = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name in overrides:
            value = repr(overrides[name])
        elif node.value is None:
            value = "None"
        else:
            try:
                value = repr(ast.literal_eval(node.value))
            except ValueError:
                value = "[]" if "list" in ast.unparse(node.value) else "None"
        parts.append(f"{name}={value}")
    return "server_args=ServerArgs(" + ", ".join(parts) + ")"


def resolved(mem: float, mrr: int, ratio: float) -> dict:
    # ServerArgs.__post_init__ (0.5.9) for the seed command on a 49140 MiB GPU at TP 2
    return {
        "model_path": MODEL,
        "tokenizer_path": MODEL,
        "host": "0.0.0.0",
        "port": 30000,
        "mem_fraction_static": mem,
        "max_running_requests": mrr,
        "chunked_prefill_size": 4096,
        "context_length": 32768,
        "tp_size": 2,
        "cuda_graph_max_bs": 32,
        "reasoning_parser": "qwen3",
        "tool_call_parser": "qwen3_coder",
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "disable_radix_cache": True,
        "disable_overlap_schedule": True,
        "mamba_full_memory_ratio": ratio,
        "mamba_scheduler_strategy": "no_buffer",
        "page_size": 1,
        "piecewise_cuda_graph_max_tokens": 4096,
        "attention_backend": "flashinfer",
        "sampling_backend": "flashinfer",
        "device": "cuda",
        "random_seed": 912345678,
    }


TRACEBACK = f"""Traceback (most recent call last):
  File "{SITE}/managers/scheduler.py", line 3130, in run_scheduler_process
    scheduler = Scheduler(
                ^^^^^^^^^^
  File "{SITE}/managers/scheduler.py", line 368, in __init__
    self.init_model_worker()
  File "{SITE}/managers/scheduler.py", line 564, in init_model_worker
    self.init_tp_model_worker()
  File "{SITE}/managers/scheduler.py", line 522, in init_tp_model_worker
    self.tp_worker = TpModelWorker(
                     ^^^^^^^^^^^^^^
  File "{SITE}/managers/tp_worker.py", line 330, in __init__
    self._model_runner = ModelRunner(
                         ^^^^^^^^^^^^
  File "{SITE}/model_executor/model_runner.py", line 413, in __init__
    self.initialize(min_per_gpu_memory)
  File "{SITE}/model_executor/model_runner.py", line 590, in initialize
    self.init_memory_pool(min_per_gpu_memory)
  File "{SITE}/model_executor/model_runner_kv_cache_mixin.py", line 416, in init_memory_pool
    raise RuntimeError(
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.85
"""


def head(ts: str, wheel: Path, mem: float, mrr: int, ratio: float, explicit_mrr: bool) -> list[str]:
    out = [
        # server_args.py:_handle_mamba_radix_cache / _handle_speculative_decoding (printed before
        # SGLang configures logging, hence Python's default format)
        "WARNING:sglang.srt.server_args:Disabling radix cache since speculative decoding for "
        "Qwen3_5ForConditionalGeneration is not supported with radix cache yet.",
    ]
    if not explicit_mrr:
        out.append(
            "WARNING:sglang.srt.server_args:Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests."
        )
    out.append(
        "WARNING:sglang.srt.server_args:Overlap scheduler is disabled when spec v2 is off or using "
        "unsupported speculative algorithm. You can set env SGLANG_ENABLE_SPEC_V2=True to enable the "
        "experimental overlap scheduler. "
    )
    out.append(f"[{ts}:05] {server_args(wheel, resolved(mem, mrr, ratio))}")
    return out


def load(ts: str, rank: str, sec: int) -> list[str]:
    avail = round(P[rank] - W, 2)
    return [
        f"[{ts}:{sec:02d} {rank}] Init torch distributed begin.",
        f"[{ts}:{sec + 1:02d} {rank}] Init torch distributed ends. elapsed=1.02 s, mem usage=0.61 GB",
        f"[{ts}:{sec + 1:02d} {rank}] Load weight begin. avail mem={P[rank]:.2f} GB",
        f"[{ts}:{sec + 40:02d} {rank}] Load weight end. elapsed=38.41 s, type=Qwen3_5ForConditionalGeneration, "
        f"dtype=torch.bfloat16, avail mem={avail:.2f} GB, mem usage={W:.2f} GB.",
    ]


def fail_085(wheel: Path) -> str:
    ts = "2026-04-20 10:02"
    lines = head(ts, wheel, 0.85, 48, 0.9, explicit_mrr=False)
    lines += load(ts, "TP0", 6)[:3] + load(ts, "TP1", 6)[:3]
    lines += [load(ts, "TP0", 6)[3], load(ts, "TP1", 6)[3]]
    lines.append(f"[{ts}:47 TP0] Using KV cache dtype: torch.bfloat16")
    for rank in ("TP0", "TP1"):
        lines.append(f"[{ts}:47 {rank}] Scheduler hit an exception: " + TRACEBACK)
    lines.append(
        f"[{ts}:48] Received sigquit from a child process. It usually means the child failed."
    )
    return "\n".join(lines) + "\n"


def serve_088(wheel: Path) -> str:
    sys.path.insert(0, str(HERE.parents[2] / "src"))
    from servefit._plan.planner import PlanRequest, plan

    args = {
        "tp_size": 2,
        "context_length": 32768,
        "speculative_algorithm": "NEXTN",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "mem_fraction_static": 0.88,
        "max_running_requests": 16,
        "mamba_full_memory_ratio": 0.5,
    }
    p = plan(
        PlanRequest(
            model="Qwen/Qwen3.6-27B",
            gpu="A6000",
            engine="sglang==0.5.9",
            args=args,
            measured_free_before_gib=min(P.values()),
            measured_weights_gib=W,
        )
    )
    assert p.verdict == "ok", p.error
    mamba = next(x for x in p.log_lines if x.startswith("Mamba Cache"))
    kv = [x for x in p.log_lines if x.startswith("KV Cache")]
    final = next(x for x in p.log_lines if x.startswith("max_total_num_tokens")).replace("≤", "")
    pool_end = next(x for x in p.log_lines if x.startswith("Memory pool end"))
    ts = "2026-04-20 10:41"
    lines = head(ts, wheel, 0.88, 16, 0.5, explicit_mrr=True)
    for rank in ("TP0", "TP1"):
        lines += load(ts, rank, 6)
    lines.append(f"[{ts}:47 TP0] Using KV cache dtype: torch.bfloat16")
    for rank in ("TP0", "TP1"):
        lines += [
            f"[{ts}:47 {rank}] {mamba}",
            f"[{ts}:47 {rank}] {kv[0]}",
            f"[{ts}:47 {rank}] {pool_end}",
        ]
    free = float(pool_end.split("=")[1].split()[0])
    lines += [
        f"[{ts}:48 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem={free - 0.31:.2f} GB",
        f"[{ts}:48 TP0] Capture cuda graph bs [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]",
        f"[{ts}:59 TP1] Capture cuda graph end. Time elapsed: 10.87 s. mem usage=0.42 GB. avail mem={free - 0.73:.2f} GB.",
        f"[{ts}:59 TP0] Capture cuda graph end. Time elapsed: 10.91 s. mem usage=0.42 GB. avail mem={free - 0.73:.2f} GB.",
    ]
    d_free = free - 0.73
    for rank in ("TP0", "TP1"):  # the EAGLE/NEXTN draft worker: a second ModelRunner on each rank
        lines += [
            f"[{ts}:59 {rank}] Init torch distributed begin.",
            f"[{ts}:59 {rank}] Init torch distributed ends. elapsed=0.00 s, mem usage=0.00 GB",
            f"[{ts}:59 {rank}] Load weight begin. avail mem={d_free:.2f} GB",
            f"[2026-04-20 10:42:03 {rank}] Load weight end. elapsed=3.71 s, type=Qwen3_5ForCausalLMMTP, "
            f"dtype=torch.bfloat16, avail mem={d_free - 0.44:.2f} GB, mem usage=0.44 GB.",
            f"[2026-04-20 10:42:03 {rank}] {kv[1] if len(kv) > 1 else kv[0]}",
            f"[2026-04-20 10:42:03 {rank}] Memory pool end. avail mem={d_free - 0.44 - 0.32:.2f} GB",
        ]
    lines += [
        f"[2026-04-20 10:42:04 TP0] Capture draft cuda graph begin. This can take up to several minutes. avail mem={d_free - 0.79:.2f} GB",
        f"[2026-04-20 10:42:09 TP0] Capture draft cuda graph end. Time elapsed: 5.02 s. mem usage=0.11 GB. avail mem={d_free - 0.90:.2f} GB.",
        f"[2026-04-20 10:42:10 TP0] {final}",
        "[2026-04-20 10:42:11] INFO:     Started server process [48211]",
        "[2026-04-20 10:42:11] INFO:     Waiting for application startup.",
        "[2026-04-20 10:42:11] INFO:     Application startup complete.",
        "[2026-04-20 10:42:11] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        '[2026-04-20 10:42:12] INFO:     127.0.0.1:40218 - "GET /get_model_info HTTP/1.1" 200 OK',
        "[2026-04-20 10:42:12 TP0] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, full token usage: 0.00, "
        "mamba usage: 0.06, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False",
        '[2026-04-20 10:42:14] INFO:     127.0.0.1:40224 - "POST /generate HTTP/1.1" 200 OK',
        "[2026-04-20 10:42:14] The server is fired up and ready to roll!",
        "[2026-04-20 10:44:37 TP0] Prefill batch, #new-seq: 1, #new-token: 42, #cached-token: 0, full token usage: 0.00, "
        "mamba usage: 0.06, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.36, cuda graph: False",
    ]
    tokens = 42
    for i in range(12):
        tokens += 160
        sec = 40 + round(i * 2.57)
        stamp = f"10:{44 + sec // 60}:{sec % 60:02d}"
        lines.append(
            f"[2026-04-20 {stamp} TP0] Decode batch, #running-req: 1, #full token: {tokens}, full token usage: 0.00, "
            f"mamba num: 1, mamba usage: 0.06, accept len: 4.00, accept rate: 1.00, cuda graph: True, "
            f"gen throughput (token/s): {62.31 - (i % 3) * 0.4:.2f}, #queue-req: 0"
        )
    lines.append(
        '[2026-04-20 10:45:10] INFO:     10.1.230.5:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    wheel = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/wheels/sglang-0.5.9")
    (HERE / "sglang_0_5_9_seed_085_fail.log").write_text(fail_085(wheel))
    (HERE / "sglang_0_5_9_seed_088_serve.log").write_text(serve_088(wheel))


if __name__ == "__main__":
    main()
