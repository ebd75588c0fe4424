"""vLLM log lines (V0 and V1, up to 0.33), each the engine's own format string as a regex.

Line prefix: V1 "({process} pid={pid}) {LEVEL} {%m-%d %H:%M:%S} [{file}:{line}] " (0.33
vllm/logger.py:_FORMAT; earlier releases prepend the process tag via decorate_logs); V0
"{LEVEL} {%m-%d %H:%M:%S} {file}:{line}] ". Parsed by doctor.reader.
Numbers: `format_gib` is str(round(x, 2)) from 0.12 on ("22.5 GiB"); older lines used %.2f/%.4f.
Citations are 0.33.0 paths inside the wheel unless a version is named.
"""

from __future__ import annotations

import re

from servefit.doctor.rules import Event, Rule, fixed, numbers, rule, whole_line

V = "vllm"
G = r"(?P<{}>[\d.]+)"


def _g(name: str) -> str:
    return G.format(name)


def _engine_config(m: re.Match[str]) -> Event:
    """'Initializing a V1 LLM engine (v0.24.0) with config: model='...', ..., tensor_parallel_size=2'."""
    body = m.group("body")
    out: Event = {"version": m.group("version")}
    for key, pat in (
        ("model", r"\bmodel='([^']*)'"),
        ("tensor_parallel_size", r"tensor_parallel_size=(\d+)"),
        ("pipeline_parallel_size", r"pipeline_parallel_size=(\d+)"),
        ("data_parallel_size", r"data_parallel_size=(\d+)"),
        ("max_model_len", r"max_seq_len=(\d+)"),
        ("quantization", r"quantization=([\w-]+)"),
        ("kv_cache_dtype", r"kv_cache_dtype=(\w+)"),
        ("enable_prefix_caching", r"enable_prefix_caching=(True|False)"),
        ("dtype", r"\bdtype=(?:torch\.)?(\w+)"),
    ):
        hit = re.search(pat, body)
        if hit:
            val = hit.group(1)
            out[key] = (
                (val == "True")
                if val in ("True", "False")
                else numbers({"v": val})["v"]
                if val.isdigit()
                else val
            )
    return out


# The `why` of the CPU platform's ISA-driven changes (and the feature each one reveals).
WHY_AVX512_BF16 = "CPU with AVX512-BF16: the accelerated GDN kernel keeps the SSM state in float32"
WHY_AMX = "CPU with AMX tiles: prefix caching and chunked prefill are off for linear attention"
CPU_FEATURE_OF = {WHY_AVX512_BF16: "avx512_bf16", WHY_AMX: "amx_tile"}


def _value_error(m: re.Match[str]) -> Event:
    """The validator's message without pydantic's input dump."""
    return {"error": "arg_error", "text": f"Value error, {m.group('message').strip()}"}


RULES: tuple[Rule, ...] = (
    # entrypoints/common/startup.py:log_version_and_model (logo: "█ ▀▄▀ █  version X");
    # 0.10-0.2x api_server.py "vLLM API server version X"; NGC banner "vLLM Version X"
    rule(
        ("LLM API server version", "LLM server version", "LLM Version", "▀▄▀ █"),
        r"(?:vLLM API server version|vLLM server version|vLLM Version|█ ▀▄▀ █\s+version)\s+v?(?P<version>\d+\.\d+[\w.+-]*)",
        "version",
        V,
        "vllm/entrypoints/common/startup.py:log_version_and_model (older: entrypoints/openai/api_server.py)",
    ),
    rule(
        "-default args:",
        r"non-default args: (?P<body>\{.*)",
        "args_nondefault",
        V,
        "vllm/entrypoints/common/startup.py:log_non_default_args (older: entrypoints/utils.py)",
    ),
    rule(
        "LLM engine (v",
        r"Initializing a V1 LLM engine \(v?(?P<version>[^)]*)\) with config: (?P<body>.*)",
        "engine_config",
        V,
        "vllm/v1/engine/core.py:EngineCore.__init__",
        _engine_config,
    ),
    # fused_moe.py:get_moe_configs logs "Using configuration from %s for MoE layer." with the
    # file get_config_file_name names: "E=..,N=..,device_name=<GPU name, spaces as _>.json"
    # (an H200-family device is written NVIDIA_H200): the only line of a MoE model's start
    # that names the GPU
    rule(
        "for MoE layer",
        r"device_name=(?P<device>[A-Za-z0-9_\-]+?)(?:,dtype=[^,]*)?(?:,block_shape=\[[\d,]*\])?\.json for MoE layer",
        "device_name",
        V,
        "vllm/model_executor/layers/fused_moe/fused_moe.py:get_moe_configs",
    ),
    rule(
        "Resolved architecture:",
        r"Resolved architecture: (?P<arch>\w+)",
        "arch",
        V,
        "vllm/config/model.py:ModelConfig._resolve_architecture",
    ),
    rule(
        "Using max model len",
        r"Using max model len (?P<n>\d+)",
        "max_model_len",
        V,
        "vllm/config/model.py:get_and_verify_max_len",
    ),
    rule(
        "Chunked prefill is enabled with max_num_batched_tokens=",
        r"Chunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)",
        "batched_tokens",
        V,
        "vllm/config/scheduler.py:SchedulerConfig.__post_init__",
    ),
    rule(
        "Setting attention block size",
        r"attention block size to (?P<n>\d+) tokens",
        "block_size",
        V,
        "vllm/platforms/interface.py:_align_hybrid_block_size (0.10-0.18: model_executor/models/config.py)",
    ),
    rule(
        "Padding mamba page size by",
        r"Padding mamba page size by (?P<pct>[\d.]+)%",
        "mamba_padding",
        V,
        "vllm/platforms/interface.py (0.10-0.18: model_executor/models/config.py)",
    ),
    rule(
        "Add ",
        r"Add (?P<n>\d+) padding layers, may waste at most (?P<pct>[\d.]+)%",
        "padding_layers",
        V,
        "vllm/v1/core/kv_cache_planning.py (older: v1/core/kv_cache_utils.py)",
    ),
    rule(
        "Hybrid or mamba-based model detected",
        r"Hybrid or mamba-based model detected: disabling prefix caching",
        "change",
        V,
        "vllm/model_executor/models/config.py:HybridAttentionMambaModelConfig (0.10-0.11)",
        fixed(
            arg="enable_prefix_caching", new=False, why="hybrid model: prefix caching not supported"
        ),
    ),
    rule(
        "Mamba cache mode is set to",
        r"Mamba cache mode is set to '(?P<new>\w+)'",
        "change",
        V,
        "vllm/model_executor/models/config.py:MambaModelConfig.verify_and_update_config",
        fixed(arg="mamba_cache_mode", why="follows --enable-prefix-caching"),
    ),
    # what the CPU platform changes by the CPU's ISA (torch.cpu._is_avx512_bf16_supported,
    # _is_amx_tile_supported): the replay reads the CPU's features back from these changes
    rule(
        "Reset SSM cache type to float32",
        r"Reset SSM cache type to float32 for accelerated GDN mamba backend",
        "change",
        V,
        "vllm/platforms/cpu.py:CpuPlatform.check_and_update_config (0.32)",
        fixed(arg="mamba_ssm_cache_dtype", new="float32", why=WHY_AVX512_BF16),
    ),
    rule(
        "Disabled unsupported prefix caching and chunked prefill",
        r"Disabled unsupported prefix caching and chunked prefill for linear attention on AMX",
        "change",
        V,
        "vllm/platforms/cpu.py:CpuPlatform.check_and_update_config (0.24)",
        fixed(arg="enable_prefix_caching", new=False, why=WHY_AMX),
    ),
    rule(
        "Updating mamba_ssm_cache_dtype to",
        r"Updating mamba_ssm_cache_dtype to '(?P<new>\w+)'",
        "change",
        V,
        "vllm/model_executor/models/config.py:NemotronHForCausalLMConfig",
        fixed(arg="mamba_ssm_cache_dtype", why="model default"),
    ),
    rule(
        "CUDA graph memory profiling is enabled",
        r"--gpu-memory-utilization=(?P<old>[\d.]+) is equivalent to --gpu-memory-utilization=(?P<new>[\d.]+) "
        r"CUDA graph memory profiling is enabled",
        "change",
        V,
        "vllm/v1/worker/gpu_worker.py:Worker.determine_available_memory (0.21+)",
        fixed(
            arg="gpu_memory_utilization", why="CUDA-graph memory is now subtracted from the budget"
        ),
    ),
    # V1 gpu_model_runner.py:load_model "Model loading took %s GiB memory and %.6f seconds"
    # (0.11: "took %.4f GiB and"); V0 / early V1 "Loading model weights took %.4f GB"
    rule(
        ("Model loading took", "Loading model weights took"),
        r"(?:Model loading took|Loading model weights took) (?P<usage_gib>[\d.]+) Gi?B",
        "weights_end",
        V,
        "vllm/v1/worker/gpu_model_runner.py:GPUModelRunner.load_model (V0: worker/model_runner.py)",
    ),
    rule(
        "Available KV cache memory:",
        r"Available KV cache memory: (?P<gib>[\d.]+) GiB",
        "kv_available",
        V,
        "vllm/v1/worker/gpu_worker.py:Worker.determine_available_memory",
    ),
    # the CPU platform: the KV memory it was given (--kv-cache-memory-bytes or
    # VLLM_CPU_KVCACHE_SPACE) out of the NUMA node's memory; format_gib numbers
    rule(
        "GiB for KV cache on node",
        r"Explicitly set \((?P<gib>[\d.]+)/(?P<node_total_gib>[\d.]+)\) GiB for KV cache on node "
        r"(?P<node>\d+)",
        "kv_available",
        V,
        "vllm/v1/worker/cpu_worker.py:CPUWorker.determine_available_memory",
        fixed(device="cpu"),
    ),
    rule(
        "Estimated CUDA graph memory:",
        r"Estimated CUDA graph memory: (?P<gib>[\d.]+) GiB",
        "cg_estimate",
        V,
        "vllm/v1/worker/gpu_model_runner.py:profile_cudagraph_memory",
    ),
    # kv_cache_utils.py: "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per
    # request: %.2fx" (one line from 0.28; two lines up to 0.26)
    rule(
        "KV cache size: ",
        r"(?:GPU|CPU|XPU)[\w +]* KV cache size: (?P<tokens>[\d,]+) tokens"
        r"(?:, Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x)?",
        "kv_tokens",
        V,
        "vllm/v1/core/kv_cache_utils.py:update_kv_cache_capacity (older: _report_kv_cache_config)",
    ),
    rule(
        "Maximum concurrency for",
        r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x",
        "concurrency",
        V,
        "vllm/v1/core/kv_cache_utils.py (V0: executor/executor_base.py)",
    ),
    rule(
        "GPU blocks: ",
        r"GPU blocks: (?P<n>\d+)(?:, # CPU blocks: (?P<cpu>\d+))?",
        "gpu_blocks",
        V,
        "vllm/executor/executor_base.py:initialize_cache (V0); early V1 kv_cache_utils.py",
    ),
    rule(
        "Memory profiling results:",
        r"Memory profiling results: total_gpu_memory=(?P<total_gib>[\d.]+)GiB "
        r"initial_memory_usage=(?P<initial_gib>[\d.]+)GiB.*?kv_cache_size=(?P<kv_gib>[\d.]+)GiB "
        r"gpu_memory_utilization=(?P<util>[\d.]+)",
        "v0_profile",
        V,
        "vllm/worker/worker.py:Worker.determine_num_available_blocks (V0)",
    ),
    rule(
        "Graph capturing finished in",
        r"Graph capturing finished in (?P<secs>[\d.]+) secs?, took (?P<usage_gib>[\d.]+) GiB",
        "graph_end",
        V,
        "vllm/v1/worker/gpu_model_runner.py:capture_model",
    ),
    rule(
        "(profile, create kv cache, warmup model) took",
        r"init engine \(profile, create kv cache, warmup model\) took (?P<secs>[\d.]+)",
        "engine_ready",
        V,
        "vllm/v1/engine/core.py:EngineCore._initialize_kv_caches",
    ),
    rule(
        "Application startup complete.",
        r"Application startup complete\.",
        "server_up",
        None,
        "uvicorn (both engines serve their API with uvicorn; SGLang warms up after it)",
    ),
    # v1/spec_decode/metrics.py:SpecDecodingLogging.log (0.8-0.10 printed the rate first)
    rule(
        "SpecDecoding metrics:",
        r"SpecDecoding metrics: (?P<text>.*)",
        "spec",
        V,
        "vllm/v1/spec_decode/metrics.py:SpecDecodingLogging.log",
        lambda m: _spec(m.group("text")),
    ),
    rule(
        "Avg generation throughput:",
        r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation throughput: "
        r"(?P<throughput>[\d.]+) tokens/s, Running: (?P<running>\d+) reqs?,(?:.*?)Waiting: (?P<queue>\d+) reqs?"
        r"(?:.*?GPU KV cache usage: (?P<usage_pct>[\d.]+)%)?",
        "throughput",
        V,
        "vllm/v1/metrics/loggers.py:LoggingStatLogger.log",
    ),
    # --- failures ---------------------------------------------------------------------------
    # argparse's "{prog}: error: {message}" (vllm/utils/argparse_utils.py:FlexibleArgumentParser
    # is an ArgumentParser; prog "vllm" for `vllm serve`, "api_server.py" for the module), e.g.
    # "vllm: error: unrecognized arguments: --no-such-flag": printed before any engine line
    rule(
        ("vllm: error: ", "vllm serve: error: ", "api_server.py: error: "),
        r"^(?:vllm(?: serve)?|api_server\.py): error: (?P<message>.+)",
        "error",
        V,
        "vllm/utils/argparse_utils.py:FlexibleArgumentParser (argparse ArgumentParser.error)",
        whole_line(error="arg_error"),
    ),
    # a config the engine refuses: pydantic's "Value error, {message} [type=value_error, ...]"
    # under "ValidationError: 1 validation error for VllmConfig" (vllm/config/vllm.py:VllmConfig
    # validators, e.g. "--mamba-block-size can only be set with --enable-prefix-caching")
    rule(
        "Value error, ",
        r"Value error, (?P<message>.+?)(?: \[type=value_error\b.*)?$",
        "error",
        V,
        "vllm/config/vllm.py:VllmConfig (pydantic validators)",
        _value_error,
    ),
    rule(
        "To serve at least one request with the",
        r"To serve at least one request with the models?'?s max seq len \((?P<max_model_len>\d+)\)",
        "error",
        V,
        "vllm/v1/core/kv_cache_planning.py:_check_enough_kv_cache_memory ('models's' up to 0.21)",
        whole_line(error="startup_memory", which="max_model_len"),
    ),
    rule(
        "KV cache is needed",
        r"(?P<needed_gib>[\d.]+) GiB KV cache is needed, which is larger than the available KV "
        r"cache memory \((?P<available_gib>[\d.]+) GiB\)",
        "error_detail",
        V,
        "vllm/v1/core/kv_cache_planning.py:_check_enough_kv_cache_memory",
    ),
    rule(
        "Based on the available memory",
        r"the estimated maximum model length is (?P<estimated_max_len>\d+)",
        "error_detail",
        V,
        "vllm/v1/core/kv_cache_planning.py:_check_enough_kv_cache_memory",
    ),
    rule(
        "KV cache (",
        r"max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens that "
        r"can be stored in KV cache \((?P<kv_tokens>\d+)\)",
        "error",
        V,
        "vllm/worker/worker.py:raise_if_cache_size_invalid (V0)",
        whole_line(error="startup_memory", which="max_model_len"),
    ),
    # the CPU platform: an explicit KV size above the node's available memory, read after the
    # weights loaded; the figures are format_gib numbers
    rule(
        "on kv cache allocation is less than requested memory for kv",
        r"Available memory on node (?P<node>\d+) \((?P<node_available_gib>[\d.]+)/"
        r"(?P<node_total_gib>[\d.]+) GiB\) on kv cache allocation is less than requested memory "
        r"for kv \((?P<kv_gib>[\d.]+) GiB\)",
        "error",
        V,
        "vllm/v1/worker/cpu_worker.py:CPUWorker.determine_available_memory",
        whole_line(error="startup_memory", which="cpu_kv_memory"),
    ),
    rule(
        "No available memory for the cache blocks",
        r"No available memory for the cache blocks",
        "error",
        V,
        "vllm/v1/core/kv_cache_planning.py:_check_enough_kv_cache_memory",
        whole_line(error="startup_memory", which="weights"),
    ),
    rule(
        "Cannot auto-fit max_model_len",
        r"Cannot auto-fit max_model_len",
        "error",
        V,
        "vllm/v1/core/kv_cache_planning.py (--max-model-len -1)",
        whole_line(error="startup_memory", which="weights"),
    ),
    rule(
        "Free memory on device",
        r"Free memory on device (?P<device>\S+) \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on "
        r"startup is less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<wanted_gib>[\d.]+) GiB\)",
        "error",
        V,
        "vllm/v1/worker/utils.py:request_memory",
        whole_line(error="startup_memory", which="free_memory"),
    ),
    # quoted in the ground-truth case vllm_nim_nemotron120b_2xh100_maxseqs_FAIL_retail95 (NIM
    # build; not in the 0.33 wheel)
    rule(
        "Mamba cache blocks",
        r"max_num_seqs \((?P<max_num_seqs>\d+)\) exceeds available Mamba cache blocks \((?P<blocks>\d+)\)",
        "error",
        V,
        "vllm as quoted in NVIDIA-AI-Blueprints/retail-shopping-assistant#95 (NIM build)",
        whole_line(error="startup_memory", which="mamba_blocks"),
    ),
    rule(
        "Engine core initialization failed",
        r"Engine core initialization failed",
        "error",
        V,
        "vllm/v1/engine/utils.py:wait_for_engine_startup",
        whole_line(error="engine_dead"),
    ),
    rule(
        "EngineCore encountered a fatal error",
        r"EngineCore encountered a fatal error",
        "error",
        V,
        "vllm/v1/engine/core.py:EngineCoreProc.run_engine_core",
        whole_line(error="engine_dead"),
    ),
    rule(
        ("Worker proc ", "Engine core proc"),
        r"(?:Worker proc (?P<proc>\S+) died unexpectedly(?: \(exit code: (?P<code>-?\d+)\))?"
        r"|Engine core proc(?:ess)? (?P<engine>\S+) died unexpectedly)",
        "exit",
        V,
        "vllm/v1/executor/multiproc_executor.py:MultiprocWorkerMonitor; vllm/v1/utils.py",
        whole_line(),
    ),
    rule(
        # the key is the message's tail: "Worker " starts every line of a V1 worker process
        # ("(Worker pid=29292) INFO ..."), which would send each of them to the rules; no
        # leading space: the filter's search stops at every character a key starts with
        "died, exit code: ",
        r"Worker (?P<proc>.+?) pid (?P<pid>\d+) died, exit code: (?P<code>-?\d+)",
        "exit",
        V,
        "vllm/executor/multiproc_worker_utils.py:WorkerMonitor (V0)",
        whole_line(),
    ),
    rule(
        # the signal that stopped the engine, before its teardown lines and uvicorn's "Shutting
        # down" (the first exit line is the one kept): a stop from outside, not a crash
        "trigger received signal=",
        r"\[shutdown\] EngineCore: trigger received signal=(?P<signal>SIG[A-Z]+)",
        "exit",
        V,
        "vllm/v1/engine/core.py:EngineCoreProc (signal handler; 0.24.0, 0.32.0)",
        whole_line(),
    ),
    rule(
        "Shutting down",
        r"Shutting down(?: FastAPI HTTP server)?\.?$",
        "exit",
        V,
        "uvicorn / vllm/entrypoints/launchers",
        whole_line(),
    ),
)


def _spec(text: str) -> Event:
    out: Event = {}
    m = re.search(r"Mean acceptance length: ([\d.]+)", text)
    if m:
        out["accept_len"] = float(m.group(1))
    m = re.search(r"(?:Avg )?Draft acceptance rate: ([\d.]+)%", text)
    if m:
        out["accept_rate"] = float(m.group(1)) / 100
    return out
