"""What both engines' layout checks share: the shapes a model is split into, and the way a
check that fails is reported.

An engine refuses a parallel layout while it builds the model, before any weight is read: a
linear layer whose output does not split over its TP group (`divide`, "{n} is not divisible by
{d}"), a model class's bare `assert` (an AssertionError with no message: the log shows only the
traceback), or a ValueError with its own text. The engines' layout modules
(engines/sglang/layout.py, engines/vllm/layout.py) walk a model in the engine's construction
order and raise the first failure as an EngineRejection, so a layout the engine refuses is a
predicted failure in plan, and never searched, suggested or counted by fix, explain or fit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator

from servefit.errors import EngineRejection
from servefit.frozen import frozen
from servefit.model.cache import by_identity
from servefit.model.layers import GatedDeltaNet, Layer
from servefit.model.spec import ModelSpec


def once_per_model(model: ModelSpec, key: tuple[Hashable, ...], check: Callable[[], None]) -> None:
    """Run `check` once per (model object, key) and raise its refusal every time: fit and fix
    re-plan one model thousands of times, and a walk of its layers costs about 0.4 ms."""

    def refusal() -> str | None:
        try:
            check()
        except EngineRejection as exc:
            return str(exc)
        return None

    text = by_identity(model, ("layout", *key), refusal)
    if text is not None:
        raise EngineRejection(text)


def divisible(n: int, d: int, cite: str, what: str) -> None:
    """`divide(n, d)` (sglang/srt/distributed/utils.py and vllm/distributed/utils.py share the
    text): AssertionError "{n} is not divisible by {d}"."""
    if d > 0 and n % d:
        raise EngineRejection(f"AssertionError: {n} is not divisible by {d} ({cite}: {what})")


def asserted(ok: bool, cite: str, condition: str, values: str) -> None:
    """A bare `assert` in the engine's model code: the error has no message, so the line says
    which assert and with which values."""
    if not ok:
        raise EngineRejection(
            f"AssertionError (a bare assert, no message): {cite} asserts {condition} ({values})"
        )


def raise_value_error(ok: bool, text: str, cite: str) -> None:
    if not ok:
        raise EngineRejection(f"ValueError: {text} ({cite})")


def pad_to(n: int, multiple: int) -> int:
    """vocab_parallel_embedding.py:pad_vocab_size: round up to a multiple."""
    return -(-n // multiple) * multiple


@frozen
class GDNDims:
    """A Gated DeltaNet layer's projection sizes (qwen3_next.py / qwen3_5.py)."""

    num_k_heads: int
    num_v_heads: int
    key_dim: int  # num_k_heads x head_k_dim
    value_dim: int  # num_v_heads x head_v_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    @classmethod
    def of(cls, m: GatedDeltaNet) -> GDNDims:
        # layers.py maps GDN onto Mamba2's fields: n_groups = k heads, state_size = k head dim,
        # num_heads = v heads, head_dim = v head dim
        return cls(m.n_groups, m.num_heads, m.n_groups * m.state_size, m.num_heads * m.head_dim)


def construction_order(model: ModelSpec) -> Iterator[Layer]:
    """The decoder layers as the engines build them (make_layers: index order)."""
    yield from model.layers


def block_size(model: ModelSpec) -> tuple[int, int] | None:
    """(block_n, block_k) of a block-quantized FP8 checkpoint (quantization_config
    weight_block_size), None for any other."""
    if model.quant.method != "fp8":
        return None
    block = model.quant.raw.get("weight_block_size")
    if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) for b in block):
        return int(block[0]), int(block[1])
    return None


def vision_heads(model: ModelSpec) -> int | None:
    """The vision tower's attention heads, when the engine builds one (a multimodal model)."""
    vc = model.vision_config
    if not model.is_multimodal or not isinstance(vc, dict):
        return None
    heads = vc.get("num_heads", vc.get("num_attention_heads"))
    return heads if isinstance(heads, int) and heads > 0 else None


# --- checks both engines make with the same code and text (each engine passes its citation)


def merged(size: int, t: int, what: str, cite: str) -> None:
    """layers/linear.py:MergedColumnParallelLinear.__init__ (both engines):
    `assert all(output_size % tp_size == 0 for output_size in output_sizes)`."""
    asserted(
        size % t == 0, cite, "all(output_size % tp_size == 0 for output_size in output_sizes)",
        f"{what} {size}, TP {t}",
    )  # fmt: skip


def attention_heads(heads: int, kv: int, t: int, cite: str) -> None:
    """The model classes' asserts before QKVParallelLinear (llama.py:LlamaAttention.__init__ and
    its copies, in both engines): heads split evenly; KV heads split (kv >= tp) or are
    replicated a whole number of times."""
    asserted(heads % t == 0, cite, "total_num_heads % tp_size == 0",
             f"{heads} attention heads, TP {t}")  # fmt: skip
    if kv >= t:
        asserted(kv % t == 0, cite, "total_num_kv_heads % tp_size == 0",
                 f"{kv} KV heads, TP {t}")  # fmt: skip
    else:
        asserted(t % kv == 0, cite, "tp_size % total_num_kv_heads == 0",
                 f"{kv} KV heads replicated over TP {t}")  # fmt: skip


def mamba2_mixer(num_heads: int, n_groups: int, tp: int, cite: str) -> None:
    """MambaMixer2.__init__'s asserts (sglang/srt/layers/attention/mamba/mamba.py and
    vllm/model_executor/layers/mamba/mamba_mixer2.py: the same two messages)."""
    if num_heads % tp:
        raise EngineRejection(
            f"AssertionError: Tensor parallel world size must divide num heads. ({cite}: "
            f"{num_heads} heads, TP {tp})"
        )
    if n_groups % tp and n_groups != 1:
        raise EngineRejection(
            "AssertionError: If tensor parallel world size does not divide num_groups, then "
            f"num_groups must equal 1. ({cite}: {n_groups} groups, TP {tp})"
        )


def tp_le_experts(tp: int, experts: int, cite: str) -> None:
    raise_value_error(
        tp <= experts,
        f"Tensor parallel size {tp} is greater than the number of experts {experts}.",
        cite,
    )


def fp8_moe_blocks(part: int, block: tuple[int, int], check_k: bool, cite: str) -> None:
    """Fp8MoEMethod.create_weights (both engines, the same texts): an expert partition of
    `part` intermediate rows must hold whole (block_n, block_k) blocks; block_k only when the
    experts are split (`check_k`)."""
    block_n, block_k = block
    raise_value_error(
        part % block_n == 0,
        f"The output_size of gate's and up's weight = {part} is not divisible by weight "
        f"quantization block_n = {block_n}.",
        cite,
    )
    raise_value_error(
        not check_k or part % block_k == 0,
        f"The input_size of down's weight = {part} is not divisible by weight quantization "
        f"block_k = {block_k}.",
        cite,
    )


def fp8_row_input(part: int, block_k: int, cite: str) -> None:
    """validate_block_quant_shapes / validate_fp8_block_shape: a row-parallel layer's input
    partition must hold whole block_k blocks."""
    raise_value_error(
        part % block_k == 0,
        f"Weight input_size_per_partition = {part} is not divisible by weight quantization "
        f"block_k = {block_k}.",
        cite,
    )
