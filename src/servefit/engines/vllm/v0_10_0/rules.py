"""What vLLM 0.10.0 decides (also 0.10.1 and 0.10.1.1: the same sizing code). Paths are inside
the 0.10.0 wheel (`pip download --no-deps vllm==0.10.0`, `unzip WHEEL 'vllm/*.py'`).

Every later profile's rules subclass this class and override what their release changed, so
each rules module reads as a diff against the previous profile's (docs/engines/vllm-<id>.md
likewise). The shared flow asking these rules is servefit/engines/vllm/resolve.py (engine args)
and planning.py (memory).
"""

from __future__ import annotations

from typing import Any

from servefit._plan.schema import Change
from servefit.engines.vllm import common
from servefit.engines.vllm.common import StateTensor, cdiv
from servefit.engines.vllm.device import capability, cuda_total_gib, is_cpu
from servefit.errors import EngineRejection, UnsupportedModelError
from servefit.hardware.spec import GPUSet
from servefit.model import readers
from servefit.model.layers import KDA, GatedDeltaNet, Mamba2, ShortConv
from servefit.model.spec import ModelSpec
from servefit.units import GiB


def _v1_requested(env: dict[str, str]) -> bool:
    return env.get("VLLM_USE_V1", "").strip().lower() in ("1", "true")


class Rules:
    VERSION = "0.10.0"

    # quantization/fp8.py:Fp8MoEMethod.create_weights raises when a block-FP8 expert partition
    # holds no whole blocks (engines/vllm/layout.py); 0.29.0 refines the scales instead
    FP8_MOE_BLOCK_REFINE = False

    # The code the release reads a config with (model/readers.py): transformers' config
    # classes, read as 5.19.0, and GPTQConfig / AWQConfig as SGLang still has them.
    CONFIG_READERS = frozenset({readers.transformers("5.19.0"), readers.GPTQ_AWQ_CLASSIC})

    # ------------------------------------------------------------------------------------------
    # Which engine runs at all
    # ------------------------------------------------------------------------------------------

    def check_engine(self, model: ModelSpec, gpus: GPUSet, env: dict[str, str]) -> None:
        """engine/arg_utils.py:EngineArgs._is_v1_supported_oracle (0.10.0 - 0.10.1.1): without
        VLLM_USE_V1=1, a model with inner state (`has_inner_state`: every Mamba / linear-attention
        hybrid) and any model on compute capability < 8.0 fall back to the V0 engine, whose
        MambaCacheManager and block manager size memory differently; servefit mirrors V1 only.
        With VLLM_USE_V1=1, compute capability < 8.0 raises; Mamba runs V1 "experimental"."""
        cap = capability(gpus.gpu)
        v1 = _v1_requested(env)
        if cap is not None and cap[0] < 8:
            if v1:
                raise EngineRejection(
                    "NotImplementedError: VLLM_USE_V1=1 is not supported with Compute "
                    "Capability < 8.0."
                )
            raise UnsupportedModelError(
                f"vLLM {self.VERSION} runs compute capability < 8.0 ({gpus.gpu.name}) on its V0 "
                'engine ("Compute Capability < 8.0 is not supported by the V1 Engine. Falling '
                'back to V0."); servefit mirrors the V1 engine only'
            )
        if model.is_hybrid:
            why = (
                "its experimental V1 Mamba path (VLLM_USE_V1=1) is not mirrored"
                if v1
                else '"Mamba is experimental on VLLM_USE_V1=1. Falling back to V0 Engine."'
            )
            raise UnsupportedModelError(
                f"vLLM {self.VERSION} runs hybrid and Mamba models on its V0 engine by default "
                f"({why}); the V0 MambaCacheManager sizes state per max_num_seqs, which servefit "
                "does not mirror: plan with vLLM 0.10.2 or later"
            )

    # ------------------------------------------------------------------------------------------
    # Engine args
    # ------------------------------------------------------------------------------------------

    # vllm/config.py:CacheConfig.gpu_memory_utilization
    DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
    # vllm/config.py:_FLOAT16_NOT_SUPPORTED_MODELS (0.10.0 - 0.10.1.1): the hf_config model types
    # _check_valid_dtype refuses float16 for and _resolve_auto_dtype never picks it for
    FLOAT16_NOT_SUPPORTED = frozenset({"gemma2", "gemma3", "plamo2", "glm4"})
    # vllm/config.py:CacheConfig.block_size default (V1: 16 on CUDA)
    DEFAULT_BLOCK_SIZE = 16
    # models/config.py:MODELS_CONFIG_MAP archs whose config's mamba_ssm_dtype becomes
    # mamba_ssm_cache_dtype (Qwen3.5's hook, 0.17.0 on)
    QWEN35_SSM_DTYPE_ARCHS: frozenset[str] = frozenset()
    # NemotronHForCausalLMConfig.verify_and_update_config (0.13.0 on): the config's
    # mamba_ssm_cache_dtype, else this default; None: no hook
    NEMOTRON_H_SSM_DEFAULT: str | None = None
    # _get_kv_cache_groups_uniform_page_size: the group size is the largest bucket when it is
    # under RATIO x the smallest (0.12.0: 1.25, 0.18.0: 1.5); None: always the smallest
    GROUP_MAX_RATIO: float | None = None

    def derived_max_model_len(self, model: ModelSpec) -> tuple[int, str | None]:
        """config.py:_get_and_verify_max_len: the smallest length key (model_max_length wins),
        x the RoPE factor unless rope_type is su / longrope / llama3; yarn starts from
        original_max_position_embeddings."""
        derived, key = common.derive_max_model_len_and_key(model)
        cfg = model.text_config or model.raw_config
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
        if isinstance(rope, dict) and rope and "gemma3" not in model.model_type:
            nested = all(isinstance(x, dict) for x in rope.values())
            factor = 1.0
            for rp in rope.values() if nested else [rope]:
                rtype = rp.get("rope_type", rp.get("type", "default"))
                if rtype not in ("su", "longrope", "llama3"):
                    factor = rp.get("factor", factor) or 1.0
                    if rtype == "yarn":
                        derived = rp["original_max_position_embeddings"]
            derived *= factor
        return int(derived), key

    def batch_defaults(self, gpus: GPUSet, world_size: int) -> tuple[int, int, str]:
        """EngineArgs._set_default_args_v1 (get_batch_defaults from 0.11.1), OPENAI_API_SERVER
        (vllm serve): 8192 tokens / 1024 seqs when device memory >= 70 GiB and "a100" is not
        in the device name, else 2048 / 256; on the CPU platform 2048 x world / 128 x world."""
        if is_cpu(gpus.gpu):
            return (
                2048 * world_size,
                128 * world_size,
                f"CPU platform: 2048 x {world_size} tokens, 128 x {world_size} seqs",
            )
        total = cuda_total_gib(gpus.gpu)
        if total >= 70 and "a100" not in gpus.gpu.name.lower():
            return 8192, 1024, f"{total:.1f} GiB device, not an A100: 8192 tokens, 1024 seqs"
        return 2048, 256, f"{total:.1f} GiB device (< 70 GiB or an A100): 2048 tokens, 256 seqs"

    def prefix_caching_default(self, model: ModelSpec) -> tuple[bool, str]:
        """_set_default_args_v1: "V1 always uses chunked prefills and prefix caching" for
        generative models."""
        return True, "V1 turns prefix caching on for generative models"

    def hybrid_prefix_caching(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> bool:
        """Prefix caching for a hybrid model after the model's config hooks (hybrids never get
        this far in 0.10.0 - 0.10.1.1: check_engine refuses them)."""
        return bool(v["enable_prefix_caching"])

    def hybrid_config_logs(self, model: ModelSpec, v: dict[str, Any]) -> list[str]:
        """Other lines MambaModelConfig.verify_and_update_config logs for every hybrid."""
        return []

    def mamba_cache_mode(
        self, model: ModelSpec, v: dict[str, Any], logs: list[str], changes: list[Change]
    ) -> str:
        """No Mamba cache modes before 0.15.0: one state per request ("none")."""
        return "none"

    def check_speculative(self, model: ModelSpec, v: dict[str, Any]) -> None:
        """What the release refuses in speculative decoding on Mamba models (nothing here)."""

    def gdn_ssm_dtype(self, conv_dtype: str, ssm_dtype: str) -> str:
        """mamba_utils.py:MambaStateDtypeCalculator.gated_delta_net_state_dtype (0.10.2 -
        0.16.0): (state, state) from mamba_cache_dtype; --mamba-ssm-cache-dtype is ignored."""
        return conv_dtype

    def mamba2_num_spec(self, model: ModelSpec, num_spec: int) -> int:
        """The speculative rows Mamba2 models add to their conv state (none before 0.17.0)."""
        return 0

    def kda_state(
        self, layer: KDA, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
    ) -> tuple[StateTensor, ...]:
        """mamba_utils.py:kda_state_shape / kda_state_dtype (0.11.1 - 0.22.1): q, k, v conv
        states (K - 1, heads x dim / tp) each, no num_spec; recurrent float32."""
        dim = common.divide(3 * layer.num_heads * layer.head_dim, tp, "KDA conv dim")
        rec = (common.divide(layer.num_heads, tp, "KDA heads"), layer.head_dim, layer.head_dim)
        return StateTensor((layer.conv_kernel - 1, dim), conv_dtype), StateTensor(rec, "float32")

    def mamba_state(
        self, model: ModelSpec, tp: int, num_spec: int, conv_dtype: str, ssm_dtype: str
    ) -> tuple[StateTensor, ...]:
        """get_mamba_state_shape_from_config / _dtype_from_config of the model class, via
        vllm/model_executor/layers/mamba/mamba_utils.py."""
        layer = model.first_recurrent()
        if isinstance(layer, KDA):
            return self.kda_state(layer, tp, num_spec, conv_dtype, ssm_dtype)
        if isinstance(layer, GatedDeltaNet):
            ssm = self.gdn_ssm_dtype(conv_dtype, ssm_dtype)
            ssm = conv_dtype if ssm == "auto" else ssm
            return common.gdn_state(layer, tp, num_spec, conv_dtype, ssm)
        ssm = conv_dtype if ssm_dtype == "auto" else ssm_dtype  # _mamba_state_dtype
        if isinstance(layer, Mamba2):
            if layer.n_groups == 0:  # Mamba-1 (Jamba)
                return common.mamba1_state(layer, tp, conv_dtype, ssm)
            spec = self.mamba2_num_spec(model, num_spec)
            return common.mamba2_state(layer, tp, spec, conv_dtype, ssm)
        if isinstance(layer, ShortConv):
            return common.short_conv_state(model, layer, tp, conv_dtype)
        kind = layer.kind if layer is not None else "this model"
        raise UnsupportedModelError(
            f"{model.name}: vLLM {self.VERSION} has no Mamba state for {kind}"
        )

    def sliding_in_flight_tokens(self, gpus: GPUSet, v: dict[str, Any]) -> int:
        """The tokens a sliding-window request holds beyond `window - 1`
        (v1/kv_cache_interface.py:SlidingWindowSpec.max_memory_usage_bytes, up to 0.25.1):
        one step's max_num_batched_tokens."""
        return int(v["max_num_batched_tokens"])

    def block_alignment(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> tuple[int, int]:
        """(block size before alignment, kernel alignment): models/config.py:
        HybridAttentionMambaModelConfig.verify_and_update_config rounds the attention block to
        16 ("some attention backends (e.g. FA) only support setting block size to multiple of
        16"); CpuPlatform.check_and_update_config sets 128 when the user did not."""
        block = v.get("block_size") or self.platform_block_size(gpus)
        return block, 16

    # servefit mirrors vLLM's CPU platform from 0.20.0 (servefit/engines/vllm/cpu_platform.py)
    CPU_PLATFORM = False
    # --kv-cache-dtype fp8 on the CPU platform (0.20.0 - 0.20.2, vllm/platforms/cpu.py:
    # CpuPlatform.check_and_update_config): a RuntimeError with chunked prefill or prefix
    # caching, else a warning and the KV cache back to "auto" ("fallback"); "isa" from 0.21.0
    CPU_FP8_KV = "fallback"
    CPU_MEMORY_CGROUP_CLAMP = False

    def cpu_update(
        self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any], logs: list[str]
    ) -> None:
        """platforms/cpu.py:CpuPlatform.check_and_update_config, what it changes that sizes
        memory after the model's hooks (nothing here; 0.22.0 - 0.24.0 turn prefix caching off
        for linear attention on AMX CPUs, 0.26.0 on reset the SSM dtype)."""

    def platform_block_size(self, gpus: GPUSet) -> int:
        """The block size before hybrid alignment: CacheConfig's 16 on CUDA; 128 on the CPU
        platform (platforms/cpu.py:CpuPlatform.check_and_update_config)."""
        return 128 if is_cpu(gpus.gpu) else self.DEFAULT_BLOCK_SIZE

    def mamba_blocks_per_request(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> int:
        """v1/kv_cache_interface.py:MambaSpec.max_memory_usage_bytes / page (0.10.x):
        page_size_bytes, one block whatever the speculative tokens."""
        return 1

    # "all" mode (a state every block): cdiv(max_model_len, mamba block), + the speculative
    # blocks from 0.22.0
    MAMBA_ALL_COUNTS_SPEC = False
    # SupportsMambaPrefixCaching model classes (0.11.1 on)
    MAMBA_PREFIX_CACHING: frozenset[str] = frozenset()

    # ------------------------------------------------------------------------------------------
    # CUDA graphs and the profiling run
    # ------------------------------------------------------------------------------------------

    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default: None = no CUDA-graph estimate at all
    # (before 0.18.0), "0" = opt-in (0.18.x - 0.19.x), "1" = on (0.20.0 on)
    CUDAGRAPH_ESTIMATE_DEFAULT: str | None = None
    # the estimate on ROCm (from 0.26.0; before, gpu_worker.py skipped it there)
    CUDAGRAPH_ESTIMATE_ROCM = False
    # VllmConfig._set_cudagraph_sizes adds max_num_seqs as a capture size when it is <= the
    # largest one (0.31.0 on)
    CAPTURE_MAX_NUM_SEQS = False

    def v1_runner(self, model: ModelSpec) -> bool:
        """The model runs on the V1 model runner (gpu_model_runner.py), whose
        profile_cudagraph_memory logs "Profiling CUDA graph memory" / "Estimated CUDA graph
        memory"; Model Runner V2 logs neither (VllmConfig.use_v2_model_runner)."""
        return True

    # VllmConfig._set_cudagraph_sizes: the largest default capture size on the SM100 family
    # (1024 from 0.28.0; 512 elsewhere)
    SM100_MAX_CAPTURE_SIZE = 512

    def graph_counts(self, gpus: GPUSet, v: dict[str, Any]) -> dict[str, int]:
        """Graphs per mode the runner captures. V1 (gpu_model_runner.py:
        profile_cudagraph_memory): PIECEWISE every capture size; FULL the uniform-decode sizes
        (q <= size <= max_num_seqs x q), with speculative decoding first rounded to multiples
        of q (CompilationConfig.adjust_cudagraph_sizes_for_spec_decode). V2
        (v1/worker/gpu/cudagraph_utils.py): PIECEWISE every capture size, FULL the
        uniform-decode sizes, not rounded (its speculative decode tiers count as one tier)."""
        mode = v["cudagraph_mode"]
        q = 1 + v["num_speculative_tokens"]
        cap = capability(gpus.gpu)
        top = self.SM100_MAX_CAPTURE_SIZE if cap is not None and cap[0] == 10 else 512
        sizes = common.capture_sizes(v, top)
        full_modes = ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "FULL")
        if v["_v1_runner"] and q > 1 and mode in full_modes and sizes:
            top = sizes[-1]
            sizes = sorted({cdiv(s, q) * q for s in sizes if cdiv(s, q) * q <= top}) or (
                [q] if q <= top else []
            )
        out: dict[str, int] = {}
        if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") and sizes:
            out["PIECEWISE"] = len(sizes)
            v["_piecewise_largest"] = sizes[-1]
        if mode in full_modes:
            full = [s for s in sizes if q <= s <= q * v["max_num_seqs"]]
            if full:
                out["FULL"] = len(full)
                v["_full_largest"] = full[-1]
        return out

    # ------------------------------------------------------------------------------------------
    # Planning (servefit/engines/vllm/planning.py)
    # ------------------------------------------------------------------------------------------

    # HybridAttentionMambaModelConfig runs at config time, before the weights load: its
    # "Setting attention block size" / "Padding mamba page size" lines come first (0.20.0
    # moved the alignment after load_model)
    BLOCK_LINES_AFTER_LOAD = False
    # kv_cache_utils.py checks each worker's available memory as is (0.29.0: minus one block)
    NULL_BLOCK_IN_CHECK = False
    # the one-request check's need: "layers" = the sum over every layer's spec
    # (kv_cache_utils.py:max_memory_usage_bytes); "first_group" = the first group's need x the
    # group size (0.14.0 - 0.18.1 _max_memory_usage_bytes_from_groups); "groups" = the sum over
    # the groups (0.19.0 on)
    ONE_REQUEST_NEED = "layers"
    # compilation.py, FULL decode graphs with more sequences than Mamba blocks: None (nothing
    # before 0.18.0), "cap" (a warning, 0.18.x - 0.19.x), "error" (0.20.0 on)
    MAMBA_SEQS_CHECK: str | None = None

    def capacity_tokens(
        self, num_blocks: int, num_groups: int, min_block: int, concurrency: float, mml: int
    ) -> int:
        """The "GPU KV cache size" figure (kv_cache_utils.py:_get_kv_cache_config_uniform_type /
        _uniform_page_size, up to 0.20.0): num_blocks // groups x the smallest block size."""
        return num_blocks // max(num_groups, 1) * min_block

    def capacity_logs(
        self, tokens: int, max_model_len: int, concurrency: float, device: str, workers: int
    ) -> list[str]:
        """kv_cache_utils.py:get_kv_cache_config (0.10.x; _get_kv_cache_config_uniform_* in
        0.11.0), which v1/engine/core.py calls once per worker: two lines per worker, "GPU"
        whatever the device."""
        return [
            f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x",
        ] * workers

    def draft_group_log(self, model: ModelSpec, v: dict[str, Any]) -> str | None:
        """A warning about the drafter's KV cache group (0.30.0 only)."""
        return None

    def kv_layout_log(self, model: ModelSpec, gpus: GPUSet) -> str | None:
        """v1/attention/backends/utils.py:resolve_kv_cache_layout's line (0.29.0 on)."""
        return None

    def attn_backend_log(self, model: ModelSpec, gpus: GPUSet) -> str | None:
        """v1/attention/selector.py:_cached_get_attn_backend's line for a backend that requires
        a KV layout (the CPU backend's HND, 0.22.0 - 0.28.0)."""
        return None

    def cpu_warmup_error(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
        """What stops the CPU worker's warm-up forward before the KV cache is sized
        (cpu_platform.moe_torch_path_error, 0.20.0 - 0.24.0)."""
        return None

    def cpu_conv_pack_error(self, model: ModelSpec, gpus: GPUSet, v: dict[str, Any]) -> str | None:
        """The CPU kernel's refusal to pack a causal-conv weight once it is loaded
        (model_executor/layers/utils.py:dispatch_cpu_unquantized_gemm, 0.22.0 - 0.31.0)."""
        return None

    def group_block_logs(self, block_sizes: list[int]) -> list[str]:
        """kv_cache_utils.py:resolve_kv_cache_block_sizes's lines for several groups (0.30.0
        on)."""
        return []

    def no_memory_error(self) -> str:
        """kv_cache_utils.py:check_enough_kv_cache_memory, available <= 0."""
        return (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )

    def max_seq_len_error(self, mml: int, needed: int, available: int, estimated: int) -> str:
        """kv_cache_utils.py:check_enough_kv_cache_memory (0.10.0 - 0.13.0): sizes with
        `{x / GiB:.2f}`, "models's"."""
        est = (
            f"Based on the available memory, the estimated maximum model length is {estimated}."
            if estimated > 0
            else ""
        )
        return (
            f"ValueError: To serve at least one request with the models's max seq len ({mml}), "
            f"({needed / GiB:.2f} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({available / GiB:.2f} GiB). {est} Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
            "engine."
        )

    def free_memory_error(self, free: float, total: float, util: float, requested: float) -> str:
        """v1/worker/gpu_worker.py:Worker.init_device (up to 0.13.0): no device name,
        round(x / GiB, 2)."""
        return (
            f"ValueError: Free memory on device ({round(free / GiB, 2)}/{round(total / GiB, 2)} "
            f"GiB) on startup is less than desired GPU memory utilization ({util}, "
            f"{round(requested / GiB, 2)} GiB). Decrease GPU memory utilization or reduce GPU "
            "memory used by other processes."
        )

    def requested_memory(self, total: float, util: float) -> float:
        """Worker.init_device: total x gpu_memory_utilization (utils.py:request_memory takes
        the ceiling from 0.14.0)."""
        return total * util

    def model_loading_log(self, weights_bytes: float) -> str:
        """gpu_model_runner.py:load_model (0.10.x - 0.11.0)."""
        return f"Model loading took {weights_bytes / GiB:.4f} GiB and … seconds"

    def available_memory_log(self, available: int) -> str:
        """gpu_worker.py:Worker.determine_available_memory (up to 0.13.0)."""
        return f"Available KV cache memory: {available / GiB:.2f} GiB"

    def kv_bytes_log(self, free: float, reserved: int) -> str | None:
        """gpu_worker.py:determine_available_memory with --kv-cache-memory-bytes; the flag does
        not exist before 0.10.2."""
        return None


RULES = Rules()
