"""SGLang log lines (0.4.x to 0.5.23), each the engine's own f-string as a regex.

Line prefix (sglang/srt/utils/common.py:configure_logger): "[%Y-%m-%d %H:%M:%S{.ms}{prefix}] "
with prefix " DP{d} PP{p} ATTN_CP{c} MOE_DP{m} TP{t} EP{e}" (managers/scheduler.py:
run_scheduler_process), parsed by doctor.reader. Formats that changed between releases are
matched by one regex with the variants optional; the comment names both sources.
Citations are paths inside the wheels (`pip download --no-deps sglang==V`).
"""

from __future__ import annotations

import re

from servefit.doctor.rules import Event, Rule, fixed, numbers, rule, whole_line

S = "sglang"
F = r"(?P<{}>[\d.]+)"  # a float group, filled with .format


def _f(name: str) -> str:
    return F.format(name)


def _weights_end(m: re.Match[str]) -> Event:
    out = numbers(m.groupdict())
    extra = m.group("extra") or ""
    dtype = re.search(r"dtype=(\S+?),", extra)
    quant = re.search(
        r"(quant=[^,]+(?:, (?:bits|quant_algo|fmt|requantization_method)=[^,]+)*)", extra
    )
    out.pop("extra", None)
    if dtype:
        out["dtype"] = dtype.group(1)
    if quant:
        out["quant"] = quant.group(1)
    return out


def _graph_bs(m: re.Match[str]) -> Event:
    return {"bs": [int(x) for x in re.findall(r"\d+", m.group("bs"))]}


DECODE_PARTS = (
    ("usage", re.compile(r"token usage: ([\d.]+)")),
    ("accept_len", re.compile(r"accept len: ([\d.]+)")),
    ("accept_rate", re.compile(r"accept rate: ([\d.]+)")),
    ("throughput", re.compile(r"gen throughput \(token/s\): ([\d.]+)")),
    ("queue", re.compile(r"#queue-req: (\d+)")),
)


def _decode(m: re.Match[str]) -> Event:
    """The decode stats line, read field by field (one regex with optional parts backtracks)."""
    out: Event = {"running": int(m.group("running")), "throughput": 0.0, "queue": 0}
    tail = m.string[m.end() :]
    for name, pat in DECODE_PARTS:
        hit = pat.search(tail)
        if hit:
            out[name] = (
                float(hit.group(1)) if "." in hit.group(1) or name != "queue" else int(hit.group(1))
            )
    return out


RULES: tuple[Rule, ...] = (
    # entrypoints/engine.py:_launch_subprocesses -> logger.info(f"{server_args=}") (0.4 - 0.5.23)
    rule(
        "ServerArgs(",
        r"server_args=ServerArgs\((?P<body>.*)",
        "args_dump",
        S,
        "sglang/srt/entrypoints/engine.py:_launch_subprocesses",
    ),
    # model_executor/model_runner.py:init_torch_distributed (0.5.9; 0.4.x has no elapsed=)
    rule(
        "Init torch distributed begin.",
        r"Init torch distributed begin\.",
        "dist_begin",
        S,
        "sglang/srt/model_executor/model_runner.py:ModelRunner.init_torch_distributed",
    ),
    rule(
        "Init torch distributed ends.",
        r"Init torch distributed ends\.(?: elapsed=[\d.]+ s,)? mem usage="
        + _f("usage_gib")
        + " GB",
        "dist_end",
        S,
        "sglang/srt/model_executor/model_runner.py:ModelRunner.init_torch_distributed",
    ),
    # 0.5.23 distributed/bootstrap.py:take_memory_baseline
    rule(
        "Memory baseline taken.",
        r"Memory baseline taken\. mem usage=" + _f("usage_gib") + " GB",
        "dist_end",
        S,
        "sglang/srt/distributed/bootstrap.py (0.5.23)",
    ),
    rule(
        "Load weight begin.",
        r"Load weight begin\. avail mem=" + _f("avail_gib") + " GB",
        "weights_begin",
        S,
        "sglang/srt/model_executor/model_runner.py:ModelRunner.load_model",
    ),
    # 0.5.9: "Load weight end. elapsed=…, type=…, dtype=…, avail mem=… GB, mem usage=… GB."
    # 0.5.23: "... type=…, {quant_str, }avail mem=…"; 0.4.x: no elapsed=
    rule(
        "Load weight end.",
        r"Load weight end\.(?: elapsed=(?P<elapsed_s>[\d.]+) s,)? type=(?P<arch>[\w.]+),"
        r"(?P<extra>.*?) ?avail mem="
        + _f("avail_gib")
        + " GB, mem usage="
        + _f("usage_gib")
        + " GB",
        "weights_end",
        S,
        "sglang/srt/model_executor/model_runner.py:ModelRunner.load_model",
        _weights_end,
    ),
    rule(
        "Using KV cache dtype:",
        r"Using KV cache dtype: (?:torch\.)?(?P<dtype>\w+)",
        "kv_dtype",
        S,
        "sglang/srt/model_executor/model_runner.py:configure_kv_cache_dtype",
    ),
    # mem_cache/memory_pool.py:MambaPool.__init__ (no space before GB, trailing space)
    rule(
        "Mamba Cache is allocated.",
        r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<size>\d+), conv_state size: "
        + _f("conv_gib")
        + r"GB, ssm_state size: "
        + _f("ssm_gib")
        + r"GB(?: intermediate_ssm_state_cache size: "
        + _f("iss_gib")
        + r"GB intermediate_conv_window_cache size: "
        + _f("icw_gib")
        + "GB)?",
        "mamba_pool",
        S,
        "sglang/srt/mem_cache/memory_pool.py:MambaPool.__init__",
    ),
    # mem_cache/memory_pool.py:_finalize_allocation_log; 0.5.23 adds "dtype: …," and says
    # "VA upper bound" with post-capture sizing
    rule(
        "KV Cache ",
        r"(?:(?P<label>Full|SWA) )?KV Cache (?:is allocated|VA upper bound)\.(?: dtype: (?:torch\.)?(?P<dtype>\w+),)? "
        r"#tokens: (?P<tokens>\d+), (?:K size: "
        + _f("k_gib")
        + " GB, V size: "
        + _f("v_gib")
        + " GB|KV size: "
        + _f("kv_gib")
        + " GB)",
        "kv_pool",
        S,
        "sglang/srt/mem_cache/memory_pool.py:KVCache._finalize_allocation_log",
    ),
    # hybrid SWA models (gpt-oss, Llama 4): the full/SWA token split, printed before the pools.
    # 0.5.9 model_runner_kv_cache_mixin.py:set_num_tokens_hybrid_swa; 0.5.23
    # pool_configurator.py:HybridSWAPoolConfigurator (same wording)
    rule(
        "Use sliding window memory pool. ",
        r"Use sliding window memory pool\. full_layer_tokens=(?P<full>\d+), swa_layer_tokens=(?P<swa>\d+)",
        "swa_split",
        S,
        "sglang/srt/model_executor/model_runner_kv_cache_mixin.py:set_num_tokens_hybrid_swa",
    ),
    rule(
        "Memory pool end.",
        r"Memory pool end\. avail mem=" + _f("avail_gib") + " GB",
        "pool_end",
        S,
        "sglang/srt/model_executor/model_runner_kv_cache_mixin.py:init_memory_pool "
        "(0.5.23 mem_cache/kv_cache_configurator.py:configure)",
    ),
    rule(
        "Reserving ",
        r"Reserving " + _f("gib") + " GB of the KV budget for post-sizing multimodal",
        "mm_reserve",
        S,
        "sglang/srt/mem_cache/kv_cache_configurator.py:mm_runtime_reservation_gb (0.5.23)",
    ),
    # 0.5.9 model_runner.py:init_device_graphs "Capture cuda graph begin/end" (0.4.x prints
    # "avail mem" before "mem usage" on the end line); 0.5.23 cuda_graph_setup.py
    # "Capture {role} {kind} CUDA graph begin/end"; draft workers "Capture draft ... graph"
    rule(
        "Capture ",
        r"Capture (?P<role>(?:\w+ )*?)(?:cuda|CUDA|cpu|npu) graph begin\..*?avail mem="
        + _f("avail_gib")
        + " GB",
        "graph_begin",
        S,
        "sglang/srt/model_executor/model_runner.py:init_device_graphs "
        "(0.5.23 model_runner_components/cuda_graph_setup.py)",
    ),
    rule(
        "Capture ",
        r"Capture cuda graph bs (?P<bs>\[[\d, ]*\])",
        "graph_bs",
        S,
        "sglang/srt/model_executor/cuda_graph_runner.py:CudaGraphRunner.__init__",
        _graph_bs,
    ),
    rule(
        "Capture ",
        r"Capture (?P<role>(?:\w+ )*?)(?:cuda|CUDA|cpu|npu) graph end\.(?: bs=\[[\d, ]*\],)?"
        r"(?: Time elapsed: (?P<elapsed_s>[\d.]+) s\.| elapsed=(?P<elapsed2_s>[\d.]+) s,)"
        r"(?: mem usage=(?P<usage_gib>[\d.]+) GB[.,])? avail mem=(?P<avail_gib>[\d.]+) GB\.?"
        r"(?: mem usage=(?P<usage2_gib>[\d.]+) GB)?",
        "graph_end",
        S,
        "sglang/srt/model_executor/model_runner.py:init_device_graphs "
        "(0.5.23 model_runner_components/cuda_graph_setup.py)",
    ),
    # managers/scheduler.py:Scheduler.__init__ (tp_rank 0); 0.4.x has no available_gpu_mem;
    # bench_one_batch.py prints only "max_total_num_tokens=N"
    rule(
        "_total_num_tokens=",
        r"(?:^|\] |\s)max_total_num_tokens=(?P<max_total_num_tokens>\d+)(?:, chunked_prefill_size="
        r"(?P<chunked_prefill_size>-?\d+), max_prefill_tokens=(?P<max_prefill_tokens>\d+), "
        r"max_running_requests=(?P<max_running_requests>\d+), context_len=(?P<context_len>\d+)"
        r"(?:, available_(?:gpu|cpu)_mem=(?P<available_gpu_mem_gib>[\d.]+) GB)?)?\s*$",
        "final",
        S,
        "sglang/srt/managers/scheduler.py:Scheduler.__init__ (bench_one_batch.py prints the short form)",
    ),
    rule(
        "The server is fired up",
        r"The server is fired up and ready to roll!",
        "ready",
        S,
        "sglang/srt/entrypoints/http_server.py:_wait_and_warmup",
    ),
    # --- changes the engine makes by itself ---------------------------------------------
    rule(
        "Max running requests is reset to 48",
        r"Max running requests is reset to (?P<new>\d+) for speculative decoding",
        "change",
        S,
        "sglang/srt/server_args.py:ServerArgs._handle_speculative_decoding "
        "(0.5.23 arg_groups/speculative_hook.py:_handle_eagle_family)",
        fixed(arg="max_running_requests", why="speculative decoding resets it when not set"),
    ),
    rule(
        "Disabling radix cache since speculative decoding",
        r"Disabling radix cache since speculative decoding for (?P<arch>\w+) is not supported with radix cache yet",
        "change",
        S,
        "sglang/srt/server_args.py:ServerArgs._handle_mamba_radix_cache (0.5.9)",
        fixed(
            arg="disable_radix_cache",
            new=True,
            why="speculative decoding on a mamba model (no_buffer)",
        ),
    ),
    rule(
        "Disabling radix cache since trtllm_mha",
        r"Disabling radix cache since trtllm_mha does not support page_size = 1",
        "change",
        S,
        "sglang/srt/server_args.py:ServerArgs._handle_mamba_radix_cache (0.5.9)",
        fixed(arg="disable_radix_cache", new=True, why="trtllm_mha needs page_size > 1"),
    ),
    rule(
        "Disabling Radix Cache for",
        r"Disabling Radix Cache for (?P<arch>\w+) as it is not yet supported",
        "change",
        S,
        "sglang/srt/server_args.py:ServerArgs._handle_model_specific_adjustments (0.5.9)",
        fixed(
            arg="disable_radix_cache", new=True, why="the architecture has no radix-cache support"
        ),
    ),
    rule(
        "Disabling overlap schedule since mamba no_buffer",
        r"Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule",
        "change",
        S,
        "sglang/srt/server_args.py:ServerArgs._handle_mamba_radix_cache (0.5.9)",
        fixed(arg="disable_overlap_schedule", new=True, why="mamba no_buffer strategy"),
    ),
    rule(
        "Overlap scheduler is disabled when spec v2 is off",
        r"Overlap scheduler is disabled when spec v2 is off",
        "change",
        S,
        "sglang/srt/server_args.py:ServerArgs._handle_speculative_decoding (0.5.9)",
        fixed(arg="disable_overlap_schedule", new=True, why="speculative decoding v1"),
    ),
    rule(
        "Non-overlap (synchronous) spec v2",
        r"Non-overlap \(synchronous\) spec v2 is used",
        "change",
        S,
        "sglang/srt/arg_groups/speculative_hook.py:_handle_eagle_family (0.5.23)",
        fixed(
            arg="disable_overlap_schedule", new=True, why="overlap disabled, synchronous spec v2"
        ),
    ),
    rule(
        "Mixed chunked prefill is disabled",
        r"Mixed chunked prefill is disabled",
        "change",
        S,
        "sglang/srt/server_args.py:ServerArgs._handle_speculative_decoding",
        fixed(arg="enable_mixed_chunk", new=False, why="speculative decoding"),
    ),
    # 0.5.23 kv_cache_configurator.py:resolve_max_num_reqs (the ground truth quotes it without
    # the parenthesis, so that part is optional)
    rule(
        "_running_requests is capped to",
        r"max_running_requests is capped to (?P<new>\d+) by the mamba state cache"
        r"(?: \(max_mamba_cache_size=(?P<K>\d+), (?P<ratio>\d+) state slots per request\))?",
        "cap",
        S,
        "sglang/srt/mem_cache/kv_cache_configurator.py:KVCacheConfigurator.resolve_max_num_reqs",
        fixed(arg="max_running_requests", why="capped by the mamba state cache"),
    ),
    rule(
        "_running_requests was reduced",
        r"max_running_requests was reduced from the requested (?P<old>\d+) to (?P<new>\d+)",
        "cap",
        S,
        "sglang/srt/mem_cache/kv_cache_configurator.py:KVCacheConfigurator.resolve_max_num_reqs",
        fixed(arg="max_running_requests", why="capped by the KV cache capacity"),
    ),
    rule(
        "_total_tokens=",
        r"max_total_tokens=(?P<old>\d+) is larger than the profiled value (?P<new>\d+)",
        "cap",
        S,
        "sglang/srt/model_executor/model_runner_kv_cache_mixin.py:init_memory_pool",
        fixed(arg="max_total_tokens", why="larger than the profiled KV pool"),
    ),
    # --- serving -------------------------------------------------------------------------
    # managers/scheduler_metrics_mixin.py:log_decode_stats (0.5.9; 0.5.23 metrics_reporter.py)
    rule(
        "Decode batch",
        r"Decode batch(?: \[\d+\])?, #running-req: (?P<running>\d+), ",
        "decode",
        S,
        "sglang/srt/managers/scheduler_metrics_mixin.py:log_decode_stats "
        "(0.5.23 managers/scheduler_components/metrics_reporter.py)",
        _decode,
    ),
    rule(
        "Prefill batch",
        r"Prefill batch(?: \[\d+\])?, #new-seq: (?P<new_seq>\d+), #new-token: (?P<new_token>\d+)"
        r"(?:.*?#running-req: (?P<running>\d+), #queue-req: (?P<queue>\d+))?",
        "prefill",
        S,
        "sglang/srt/managers/scheduler_metrics_mixin.py:log_prefill_stats",
    ),
    # utils/request_logger.py:log_finished_request (--log-requests): out={'text': '...'}
    rule(
        "Finish: obj=",
        r"Finish: obj=.*?out=\{'text': (?P<text>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")",
        "finish_text",
        S,
        "sglang/srt/utils/request_logger.py:RequestLogger.log_finished_request",
    ),
    # --- failures and exits --------------------------------------------------------------
    rule(
        (
            "Scheduler hit an exception",
            "TokenizerManager hit an exception",
            "DetokenizerManager hit an exception",
            "DataParallelController hit an exception",
        ),
        r"(?P<who>Scheduler|TokenizerManager|DetokenizerManager|DataParallelController) hit an exception",
        "exception_start",
        S,
        "sglang/srt/managers/scheduler.py:run_scheduler_process",
    ),
    rule(
        "Not enough memory. Please try to increase --mem-fraction-static.",
        r"Not enough memory\. Please try to increase --mem-fraction-static\."
        r"(?: Current value: (?:self\.server_args\.)?mem_fraction_static=(?P<mem_fraction_static>[\d.]+))?",
        "error",
        S,
        "sglang/srt/model_executor/model_runner_kv_cache_mixin.py:init_memory_pool (0.5.9); "
        "model_executor/pool_configurator.py:MemoryPoolConfig.__post_init__ (0.5.23)",
        whole_line(error="startup_memory", which="kv_pool_empty"),
    ),
    rule(
        "Loaded weights leave no GPU memory for the KV cache",
        r"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
        r"(?P<mem_fraction_static>[\d.]+)\. Raise --mem-fraction-static above (?P<suggested>[\d.]+)",
        "error",
        S,
        "sglang/srt/mem_cache/kv_cache_configurator.py:_profile_available_bytes (0.5.23)",
        whole_line(error="startup_memory", which="weights"),
    ),
    rule(
        "Not enough GPU memory for hybrid",
        r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache\. Computed "
        r"max_mamba_cache_size=(?P<K>-?\d+) \(total_rest_memory=(?P<rest_gib>-?[\d.]+) GB, "
        r"mamba_cache_per_req=(?P<per_req_mib>[\d.]+) MB\)",
        "error",
        S,
        "sglang/srt/mem_cache/kv_cache_configurator.py:_handle_max_mamba_cache (0.5.23)",
        whole_line(error="startup_memory", which="mamba_state"),
    ),
    rule(
        "Hybrid (mamba/linear-attention) state cache is too small",
        r"state cache is too small to serve any requests\. max_mamba_cache_size=(?P<K>-?\d+), "
        r"mamba_ratio=(?P<ratio>\d+), resulting max_num_reqs=(?P<reqs>-?\d+)",
        "error",
        S,
        "sglang/srt/mem_cache/kv_cache_configurator.py:resolve_max_num_reqs (0.5.23)",
        whole_line(error="startup_memory", which="mamba_state"),
    ),
    rule(
        "_running_request is zero",
        r"_running_request is zero",
        "error",
        S,
        "sglang/srt/managers/tp_worker.py:TpModelWorker.__init__ (assert)",
        whole_line(error="startup_memory", which="requests_zero"),
    ),
    rule(
        "Memory pool size is too small",
        r"Memory pool size is too small",
        "error",
        S,
        "sglang/srt/managers/tp_worker.py:TpModelWorker.__init__ (assert)",
        whole_line(error="startup_memory", which="kv_pool_small"),
    ),
    rule(
        "greater than the derived context_length",
        r"context_length \((?P<asked>\d+)\) is greater than the derived "
        r"context_length \((?P<derived>\d+)\)",
        "error",
        S,
        "sglang/srt/configs/model_config.py:ModelConfig._derive_context_length",
        whole_line(error="arg_error"),
    ),
    rule(
        "Received sigquit from a child process",
        r"Received sigquit from a child process",
        "exit",
        S,
        "sglang/srt/entrypoints/engine.py:_set_envs_and_config.launch_phase_sigquit_handler",
        whole_line(),
    ),
    rule(
        "SIGQUIT received.",
        r"SIGQUIT received\.",
        "exit",
        S,
        "sglang/srt/managers/tokenizer_manager.py:SignalHandler.running_phase_sigquit_handler",
        whole_line(),
    ),
    rule(
        "SIGTERM received.",
        r"SIGTERM received\.",
        "exit",
        S,
        "sglang/srt/managers/tokenizer_manager.py:SignalHandler.sigterm_handler",
        whole_line(),
    ),
    rule(
        "Rank ",
        r"Rank (?P<rank>\d+) scheduler is dead",
        "exit",
        S,
        "sglang/srt/entrypoints/engine.py:_wait_for_scheduler_ready",
        whole_line(),
    ),
    rule(
        "Exit code: ",
        r"Exit code: (?P<code>-?\d+)",
        "exit",
        S,
        "sglang/srt/entrypoints/engine.py:_wait_for_scheduler_ready",
        whole_line(),
    ),
)

# Arg-resolution errors the profiles predict (servefit/engines/sglang/v0_5_9/args.py and
# flow/args.py); the engine raises them before any memory is touched. Matched as Python
# exception lines.
ARG_ERROR_MARKERS: tuple[str, ...] = (
    "speculative decoding does not support dp attention",
    "mamba extra_buffer is not supported for",
    "extra_buffer is not supported for",
    "must be greater than or equal to speculative_num_draft_tokens",
    "needs mamba state, got",
    "no_buffer only supports page_size=1",
    "no_buffer do not support overlap schedule",
    "no_buffer do not support trtllm_mha attention backend",
    "either chunk_size or page_size must be divisible by the other",
    "trtllm_mha backend only supports topk = 1",
    "speculative_eagle_topk > 1 with page_size > 1 is only supported on",
    "chunked_prefill_size must be divisible by page_size",
    "is not compatible with radix cache when using --mamba-scheduler-strategy no_buffer",
    "Unsupported kv_cache_dtype",
)
