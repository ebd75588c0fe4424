"""Start-up stages and numbers from the engine's own log lines, as they are written.

Each pattern is the engine's format string; the source is named next to it. The patterns use
`search`, so per-rank prefixes (`[2026-02-01 00:05:02 TP0] `, `(EngineCore_DP0 pid=165) INFO
06-01 09:47:57 [gpu_worker.py:773] `) do not matter. Only the first occurrence of a number is
kept: with TP > 1 every rank prints the same lines and rank 0 prints first.

This is live progress only; servefit.doctor reads a whole log for diagnosis.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

from servefit.frozen import frozen
from servefit.launch.schema import STAGES, EngineFacts

_NUM = r"(-?\d+(?:\.\d+)?)"


@frozen
class _Rule:
    pattern: re.Pattern[str]
    stage: str | None  # the stage this line starts, if any
    apply: Callable[[EngineFacts, re.Match[str]], None] | None = None


def _set(**fields: tuple[int, type]) -> Callable[[EngineFacts, re.Match[str]], None]:
    """Copy match groups to facts, first occurrence only."""

    def apply(facts: EngineFacts, m: re.Match[str]) -> None:
        for name, (group, kind) in fields.items():
            raw = m.group(group)
            if raw is None or getattr(facts, name) is not None:
                continue
            setattr(facts, name, kind(raw.replace(",", "")))

    return apply


def _kv_sglang(facts: EngineFacts, m: re.Match[str]) -> None:
    # Hybrid SWA models print two target pools before "Memory pool end"; 0.5.9 prints the
    # smaller SWA pool first (mem_cache/swa_memory_pool.py:SWAKVPool): keep the larger, the
    # full-attention pool. Lines after "Memory pool end" are the draft's.
    tokens = int(m.group(1))
    before_end = facts.pool_end_avail_gib is None
    if facts.kv_tokens is None or (before_end and tokens > facts.kv_tokens):
        facts.kv_tokens = tokens
        sizes = [float(x) for x in m.groups()[1:] if x is not None]
        facts.kv_gib = round(sum(sizes), 2)


def _mamba(facts: EngineFacts, m: re.Match[str]) -> None:
    if facts.mamba_slots is None:
        facts.mamba_slots = int(m.group(1))
        facts.mamba_gib = round(float(m.group(2)) + float(m.group(3)), 2)
        if m.group(4) is not None:
            facts.spec_state_gib = round(float(m.group(4)) + float(m.group(5) or 0), 2)


def _ready(facts: EngineFacts, m: re.Match[str]) -> None:
    facts.engine_says_ready = True


def _url(facts: EngineFacts, m: re.Match[str]) -> None:
    if facts.http_url is None:
        facts.http_url = m.group(1)


SGLANG_RULES: tuple[_Rule, ...] = (
    # sglang/srt/model_executor/model_runner.py:load_model (0.5.9 and 0.5.23)
    # f"Load weight begin. avail mem={...:.2f} GB"
    _Rule(
        re.compile(r"Load weight begin\. avail mem=" + _NUM + " GB"),
        "loading_weights",
        _set(avail_before_load_gib=(1, float)),
    ),
    # sglang/srt/model_executor/model_runner.py:load_model
    # 0.5.9:  f"Load weight end. elapsed=.. s, type=.., dtype=.., avail mem=.. GB, mem usage=.. GB."
    # 0.5.23: f"Load weight end. elapsed=.. s, type=.., {quant_str}, avail mem=.. GB, mem usage=.. GB."
    _Rule(
        re.compile(r"Load weight end\. .*?avail mem=" + _NUM + r" GB, mem usage=" + _NUM + " GB"),
        "allocating",
        _set(avail_after_load_gib=(1, float), weights_gib=(2, float)),
    ),
    # sglang/srt/mem_cache/memory_pool.py:MambaPool.__init__
    # f"Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {..:.2f}GB, "
    # f"ssm_state size: {..:.2f}GB " [speculative: f"intermediate_ssm_state_cache size: {..:.2f}GB "
    # f"intermediate_conv_window_cache size: {..:.2f}GB "]
    _Rule(
        re.compile(
            r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+), conv_state size: "
            + _NUM
            + r"GB, ssm_state size: "
            + _NUM
            + r"GB(?: intermediate_ssm_state_cache size: "
            + _NUM
            + r"GB(?: intermediate_conv_window_cache size: "
            + _NUM
            + r"GB)?)?"
        ),
        "allocating",
        _mamba,
    ),
    # sglang/srt/mem_cache/memory_pool.py:KVCache._finalize_allocation_log (0.5.9)
    # f"KV Cache is allocated. #tokens: {num_tokens}, K size: {..:.2f} GB, V size: {..:.2f} GB"
    # f"KV Cache is allocated. #tokens: {num_tokens}, KV size: {..:.2f} GB"; 0.5.18+ adds "dtype: .., "
    _Rule(
        re.compile(
            r"KV Cache is allocated\. (?:dtype: \S+, )?#tokens: (\d+), (?:K size: "
            + _NUM
            + r" GB, V size: "
            + _NUM
            + r" GB|KV size: "
            + _NUM
            + " GB)"
        ),
        "allocating",
        _kv_sglang,
    ),
    # sglang/srt/model_executor/model_runner_kv_cache_mixin.py:init_memory_pool (0.5.9),
    # sglang/srt/mem_cache/kv_cache_configurator.py (0.5.23): f"Memory pool end. avail mem=.. GB"
    _Rule(
        re.compile(r"Memory pool end\. avail mem=" + _NUM + " GB"),
        "allocating",
        _set(pool_end_avail_gib=(1, float)),
    ),
    # sglang/srt/model_executor/model_runner.py:init_device_graphs (0.5.9)
    # f"Capture {graph_backend} begin. This can take up to several minutes. avail mem=.. GB";
    # model_runner_components/cuda_graph_setup.py (0.5.23) f"Capture {name} CUDA graph begin. ..."
    _Rule(re.compile(r"Capture (?:[\w ]+ )?(?:cuda|CUDA) graph begin"), "capturing_graphs"),
    # 0.5.9: f"Capture cuda graph end. Time elapsed: {..:.2f} s. mem usage={..:.2f} GB. ..."
    # 0.5.23: f"Capture {name} CUDA graph end. elapsed={..:.2f} s, mem usage={..:.2f} GB, ..."
    # 0.4.x printed avail mem before mem usage ("Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.")
    _Rule(
        re.compile(
            r"Capture (?:[\w ]+ )?(?:cuda|CUDA) graph end\. (?:Time elapsed: |elapsed=)"
            + _NUM
            + r" s[.,] (?:avail mem=-?[\d.]+ GB\. )?mem usage="
            + _NUM
            + " GB"
        ),
        "capturing_graphs",
        _set(graph_s=(1, float), graph_gib=(2, float)),
    ),
    # sglang/srt/managers/scheduler.py:Scheduler.init_memory_pool_and_cache / __init__
    # f"max_total_num_tokens={..}, chunked_prefill_size={..}, max_prefill_tokens={..}, "
    # f"max_running_requests={..}, context_len={..}, available_gpu_mem={..:.2f} GB"
    _Rule(
        re.compile(
            r"max_total_num_tokens=(\d+), chunked_prefill_size=-?\d+, max_prefill_tokens=\d+, "
            r"max_running_requests=(\d+), context_len=(\d+)"
        ),
        None,
        _set(kv_tokens=(1, int), max_running_requests=(2, int), context_len=(3, int)),
    ),
    # sglang/srt/mem_cache/kv_cache_configurator.py (0.5.23)
    # "max_running_requests is capped to %d by the mamba state cache (...)"
    _Rule(
        re.compile(r"max_running_requests is capped to (\d+)"),
        None,
        _set(capped_running_requests=(1, int)),
    ),
    # uvicorn/config.py:Config.bind_socket / uvicorn/server.py:_log_started_message
    # f"Uvicorn running on {addr_format} (Press CTRL+C to quit)"
    _Rule(re.compile(r"Uvicorn running on (\S+)"), None, _url),
    # sglang/srt/entrypoints/http_server.py:_wait_and_warmup (after its own warm-up request)
    _Rule(re.compile(r"The server is fired up and ready to roll!"), None, _ready),
)

VLLM_RULES: tuple[_Rule, ...] = (
    # vllm/v1/worker/gpu_model_runner.py:load_model  "Starting to load model %s..."
    _Rule(re.compile(r"Starting to load model "), "loading_weights"),
    # vllm/v1/worker/gpu_model_runner.py:load_model
    # "Model loading took %s GiB memory and %.6f seconds" (older releases: "... GiB and ...")
    _Rule(
        re.compile(r"Model loading took " + _NUM + " GiB"),
        "allocating",
        _set(weights_gib=(1, float)),
    ),
    # vllm/v1/worker/gpu_worker.py:determine_available_memory "Available KV cache memory: %s GiB"
    _Rule(
        re.compile(r"Available KV cache memory: " + _NUM + " GiB"),
        "allocating",
        _set(kv_gib=(1, float)),
    ),
    # vllm/v1/core/kv_cache_utils.py:update_kv_cache_capacity
    # "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"
    # (one line in 0.33; two log calls in older releases)
    _Rule(
        re.compile(r"KV cache size: ([\d,]+) tokens"),
        "allocating",
        _set(kv_tokens=(1, int)),
    ),
    _Rule(
        re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: " + _NUM + "x"),
        "allocating",
        _set(context_len=(1, int), max_concurrency=(2, float)),
    ),
    # vllm/v1/worker/gpu_model_runner.py:capture_model, tqdm desc "Capturing CUDA graphs ({}, {})"
    _Rule(re.compile(r"Capturing CUDA graphs"), "capturing_graphs"),
    # vllm/v1/worker/gpu_model_runner.py:capture_model "Graph capturing finished in %.0f secs, took %.2f GiB"
    _Rule(
        re.compile(r"Graph capturing finished in " + _NUM + " secs, took " + _NUM + " GiB"),
        "capturing_graphs",
        _set(graph_s=(1, float), graph_gib=(2, float)),
    ),
    # vllm/entrypoints/launchers/api_server/entry.py:build_and_serve "Starting vLLM server on %s"
    _Rule(re.compile(r"Starting vLLM (?:API )?server (?:\d+ )?on (\S+)"), None, _url),
    # uvicorn/lifespan/on.py:LifespanOn.startup "Application startup complete."
    _Rule(re.compile(r"Application startup complete\."), None, _ready),
)

# The last line of a Python traceback ("RuntimeError: Not enough memory. ...", "torch.OutOfMemoryError:
# CUDA out of memory. ...") and the bind error uvicorn logs (uvicorn/server.py:Server.startup logs the
# OSError from asyncio's create_server: "[Errno 98] error while attempting to bind on address ...").
# Python's own start-up failures ("python: Error while finding module specification for
# 'sglang.launch_server' (ModuleNotFoundError: ...)", "python: can't open file ...") count too.
_ERROR = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)(?::.*)?|.*\[Errno \d+\] error while attempting to bind.*"
    r"|\S*python[\d.]*: (?:Error while finding module specification|can't open file) .*)$"
)
MAX_ERRORS = 5
# Per-line prefixes in front of an error line: vLLM's formatter prefixes every line of a multi-line
# message (vllm/logger.py:_FORMAT "(%(vllm_process_name)s pid=%(process)d) %(levelname)s
# %(asctime)s [%(fileinfo)s:%(lineno)d] "); SGLang's "[%(asctime)s TP0] " (configure_logger).
_PREFIX = re.compile(
    r"^(?:\([^)]* pid=\d+\) )?(?:[A-Z]+ \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] )?"
    r"(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [^\]]*)?\] )?"
)


def _strip_ansi(line: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", line)


class LogProgress:
    """Feed lines in order; `stage` and `facts` follow what the engine has printed."""

    def __init__(self, engine: str) -> None:
        self.rules = SGLANG_RULES if engine == "sglang" else VLLM_RULES
        self.facts = EngineFacts()
        self.stage = "starting"

    def feed(self, line: str) -> bool:
        """Read one line; True if it was a progress or error line (the stage or facts may have
        changed). Cheap for the request lines a serving engine prints all day."""
        line = _strip_ansi(line).rstrip("\r\n")
        if not line:
            return False
        changed = False  # a matched line, even one whose number was already known
        for rule in self.rules:
            m = rule.pattern.search(line)
            if m is None:
                continue
            changed = True
            if rule.apply is not None:
                # a torn number (inf after float(), an int beyond 4300 digits) leaves the fact
                # unknown; pydantic's ValidationError is a ValueError
                with contextlib.suppress(ValueError):
                    rule.apply(self.facts, m)
            if rule.stage is not None and STAGES.index(rule.stage) > STAGES.index(self.stage):
                self.stage = rule.stage
        stripped = _PREFIX.sub("", line.strip(), count=1)[:500]
        if (
            _ERROR.match(stripped)
            and len(self.facts.errors) < MAX_ERRORS
            and stripped not in self.facts.errors
        ):
            self.facts.errors.append(stripped)
            changed = True
        return changed


def split_lines(buffer: bytes) -> tuple[list[str], bytes]:
    """Complete lines of `buffer` and the unfinished rest. A carriage return ends a line too:
    progress bars (tqdm) redraw with \\r and never print \\n until they finish."""
    text_end = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
    if text_end < 0:
        return [], buffer
    done, rest = buffer[: text_end + 1], buffer[text_end + 1 :]
    lines = re.split(rb"\r\n|\r|\n", done)[:-1]
    return [ln.decode("utf-8", "replace") for ln in lines], rest
