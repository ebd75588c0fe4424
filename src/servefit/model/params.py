"""Parameter inventory: every weight of a model as a logical tensor with its sharding rule.

`tensors(spec)` lists the weights (checkpoint-style names, shapes, how SGLang shards them);
`count_params(spec)` sums them per ParamCount part; `weights.py` turns them into bytes per GPU.

Shapes follow the SGLang model files (cited per mixer). Parts:
* attention: every token-mixer weight (attention, MLA, GDN, Mamba2, KDA, short conv,
  lightning), including the mixers' internal norms, conv kernels, A_log/D/dt_bias;
* dense_ffn: dense MLPs, shared experts, routers (+ expert-score bias), shared-expert gates and
  latent-MoE projections (all replicated or TP-split, never EP-split);
* experts: routed experts only (what EP splits);
* norms: the decoder layers' pre/post norms and the final norm;
* vision: the vision tower and its projector/merger (an estimate from vision_config; see
  `_vision`);
* mtp: the MTP / NextN draft modules as stored in the checkpoint (DeepSeek stores copies of the
  embedding and LM head there; they are marked `shared` because engines reuse the target's).
"""

from __future__ import annotations

from math import ceil, prod
from typing import Any

from servefit.frozen import frozen
from servefit.model.fields import Fields, as_int
from servefit.model.layers import (
    KDA,
    MLA,
    DenseMLP,
    FullAttention,
    GatedDeltaNet,
    Layer,
    LightningAttention,
    Mamba2,
    MoE,
    ShortConv,
)
from servefit.model.spec import ModelSpec, ParamCount

PARTS = ("embedding", "lm_head", "attention", "dense_ffn", "experts", "norms", "vision", "mtp")


@frozen
class Tensor:
    """One logical weight (or `count` identical ones, e.g. routed experts).

    shard: how tensor parallelism splits it on `out` (col), `inp` (row), not at all (rep),
    the vocabulary (vocab, padded like VocabParallelEmbedding), or by heads with
    replication when there are fewer heads than ranks (kv: attention KV heads; groups: Mamba2
    B/C groups). `heads` is that head/group count. Routed experts (role "expert") are also
    split by EP on `count`.
    place: "first" / "last" PP stage, "layer" (the stage that owns `layer`), "mtp" (draft).
    """

    name: str
    part: str
    out: int
    inp: int = 1
    count: int = 1
    shard: str = "rep"
    role: str = "none"
    layer: int | None = None
    place: str = "layer"
    heads: int = 0
    dtype: str | None = None
    shared: bool = False

    @property
    def numel(self) -> int:
        return self.out * self.inp * self.count


class _Naming:
    """Checkpoint module names, so that quant skip lists and per-layer tables match."""

    def __init__(self, spec: ModelSpec) -> None:
        mt, arch = spec.model_type, spec.architecture
        self.qwen35 = mt.startswith("qwen3_5")
        if mt == "nemotron_h":
            self.root = "backbone."
            self.embed = "backbone.embeddings"
            self.final_norm = "backbone.norm_f"
        elif spec.text_config is not spec.raw_config and "ForConditionalGeneration" in arch:
            self.root = "model.language_model."
            self.embed = "model.language_model.embed_tokens"
            self.final_norm = "model.language_model.norm"
        else:
            self.root = "model."
            self.embed = "model.embed_tokens"
            self.final_norm = "model.norm"
        self.mixer = {
            "mamba2": "mixer" if mt == "nemotron_h" else "mamba",
            "gated_deltanet": "linear_attn",
            "short_conv": "conv",
        }
        self.ffn = (
            "mixer"
            if mt == "nemotron_h"
            else "feed_forward"
            if mt.startswith("lfm2")
            else (
                "block_sparse_moe"
                if mt in ("mixtral", "minimax", "minimax_m1", "granitemoehybrid")
                else "mlp"
            )
        )

    def layer(self, i: int) -> str:
        return f"{self.root}layers.{i}"


def _cfg(spec: ModelSpec) -> Fields:
    return Fields(spec.text_config if isinstance(spec.text_config, dict) else {})


# ------------------------------------------------------------------------------ mixers


def _gqa(m: FullAttention, h: int, p: str, spec: ModelSpec, t: Fields, i: int) -> list[Tensor]:
    # sglang/srt/models/qwen3_5.py:Qwen3_5AttentionDecoderLayer (QKVParallelLinear + o_proj);
    # attn_output_gate doubles q (query + gate).
    gate = 2 if t.bool("attn_output_gate", default=False) else 1
    q = m.num_heads * m.head_dim
    kv = m.num_kv_heads * m.head_dim
    a = f"{p}.self_attn"
    out = [
        Tensor(f"{a}.q_proj", "attention", q * gate, h, shard="col", role="linear", layer=i),
        Tensor(
            f"{a}.k_proj",
            "attention",
            kv,
            h,
            shard="kv",
            role="linear",
            layer=i,
            heads=m.num_kv_heads,
        ),
        Tensor(
            f"{a}.v_proj",
            "attention",
            m.num_kv_heads * m.v_head_dim,
            h,
            shard="kv",
            role="linear",
            layer=i,
            heads=m.num_kv_heads,
        ),
        Tensor(
            f"{a}.o_proj",
            "attention",
            h,
            m.num_heads * m.v_head_dim,
            shard="row",
            role="linear",
            layer=i,
        ),
    ]
    mt = spec.model_type
    bias = t.bool("attention_bias", default=False)
    if bias or mt.startswith("qwen2"):  # Qwen2 always has q/k/v bias
        out += [
            Tensor(f"{a}.q_proj.bias", "attention", q * gate, shard="col", layer=i),
            Tensor(f"{a}.k_proj.bias", "attention", kv, shard="kv", layer=i, heads=m.num_kv_heads),
            Tensor(f"{a}.v_proj.bias", "attention", kv, shard="kv", layer=i, heads=m.num_kv_heads),
        ]
    if bias:
        out.append(Tensor(f"{a}.o_proj.bias", "attention", h, layer=i))
    if mt.startswith(("qwen3", "lfm2", "olmo")):  # per-head q/k RMSNorm
        out += [
            Tensor(f"{a}.q_norm", "attention", m.head_dim, layer=i),
            Tensor(f"{a}.k_norm", "attention", m.head_dim, layer=i),
        ]
    if mt == "gpt_oss":  # attention sinks, one per head
        out.append(
            Tensor(f"{a}.sinks", "attention", m.num_heads, shard="col", layer=i, dtype="float32")
        )
    return out


def _mla(m: MLA, h: int, p: str, t: Fields, i: int) -> list[Tensor]:
    # sglang/srt/models/deepseek_v2.py:DeepseekV2AttentionMLA: q_a / kv_a are replicated
    # (fused_qkv_a_proj_with_mqa), q_b / kv_b column-parallel, o_proj row-parallel.
    a = f"{p}.self_attn"
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    out: list[Tensor] = []
    q_lora = t.opt_int("q_lora_rank")
    if q_lora:
        out += [
            Tensor(f"{a}.q_a_proj", "attention", q_lora, h, role="linear", layer=i),
            Tensor(f"{a}.q_a_layernorm", "attention", q_lora, layer=i),
            Tensor(
                f"{a}.q_b_proj",
                "attention",
                m.num_heads * qk,
                q_lora,
                shard="col",
                role="linear",
                layer=i,
            ),
        ]
    else:
        out.append(
            Tensor(
                f"{a}.q_proj", "attention", m.num_heads * qk, h, shard="col", role="linear", layer=i
            )
        )
    out += [
        Tensor(
            f"{a}.kv_a_proj_with_mqa",
            "attention",
            m.kv_lora_rank + m.qk_rope_head_dim,
            h,
            role="linear",
            layer=i,
        ),
        Tensor(f"{a}.kv_a_layernorm", "attention", m.kv_lora_rank, layer=i),
        Tensor(
            f"{a}.kv_b_proj",
            "attention",
            m.num_heads * (m.qk_nope_head_dim + m.v_head_dim),
            m.kv_lora_rank,
            shard="col",
            role="linear",
            layer=i,
        ),
        Tensor(
            f"{a}.o_proj",
            "attention",
            h,
            m.num_heads * m.v_head_dim,
            shard="row",
            role="linear",
            layer=i,
        ),
    ]
    if t.bool("mla_use_output_gate", default=False):  # Kimi-K3 MLA output gate
        out.append(
            Tensor(
                f"{a}.g_proj",
                "attention",
                m.num_heads * m.v_head_dim,
                h,
                shard="col",
                role="linear",
                layer=i,
            )
        )
    return out


def _gdn(m: GatedDeltaNet, h: int, p: str, qwen35: bool, i: int) -> list[Tensor]:
    # sglang/srt/models/qwen3_5.py:Qwen3_5GatedDeltaNet: in_proj_qkvz / in_proj_ba column-
    # parallel, conv1d column-parallel (K taps per channel), A_log (fp32) and dt_bias per
    # v-head split by TP, norm over head_v_dim replicated, out_proj row-parallel.
    a = f"{p}.linear_attn"
    key_dim = m.n_groups * m.state_size  # num_k_heads * k_head_dim
    value_dim = m.intermediate_size  # num_v_heads * v_head_dim
    nv = m.num_heads
    if qwen35:  # Qwen3.5 checkpoints store the fused projections split
        proj = [
            Tensor(
                f"{a}.in_proj_qkv",
                "attention",
                2 * key_dim + value_dim,
                h,
                shard="col",
                role="linear",
                layer=i,
            ),
            Tensor(
                f"{a}.in_proj_z", "attention", value_dim, h, shard="col", role="linear", layer=i
            ),
            Tensor(f"{a}.in_proj_b", "attention", nv, h, shard="col", role="linear", layer=i),
            Tensor(f"{a}.in_proj_a", "attention", nv, h, shard="col", role="linear", layer=i),
        ]
    else:
        proj = [
            Tensor(
                f"{a}.in_proj_qkvz",
                "attention",
                2 * key_dim + 2 * value_dim,
                h,
                shard="col",
                role="linear",
                layer=i,
            ),
            Tensor(f"{a}.in_proj_ba", "attention", 2 * nv, h, shard="col", role="linear", layer=i),
        ]
    return proj + [
        Tensor(
            f"{a}.conv1d", "attention", 2 * key_dim + value_dim, m.conv_kernel, shard="col", layer=i
        ),
        Tensor(f"{a}.A_log", "attention", nv, shard="col", layer=i, dtype="float32"),
        Tensor(f"{a}.dt_bias", "attention", nv, shard="col", layer=i),
        Tensor(f"{a}.norm", "attention", m.head_dim, layer=i),
        Tensor(f"{a}.out_proj", "attention", h, value_dim, shard="row", role="linear", layer=i),
    ]


def _mamba2(m: Mamba2, h: int, p: str, t: Fields, i: int) -> list[Tensor]:
    # sglang/srt/layers/attention/mamba/mamba.py:MambaMixer2: in_proj = [z, x, B, C, dt]
    # column-parallel with the B/C groups replicated when n_groups % tp != 0; conv1d over
    # x/B/C; A (fp32), D, dt_bias per head; gated RMSNorm over the (TP-split) intermediate.
    a = p
    inter, g, n, heads, k = (
        m.intermediate_size,
        m.n_groups,
        m.state_size,
        m.num_heads,
        m.conv_kernel,
    )
    if m.head_dim == 1 and g == 0:
        return _mamba1(m, h, a, t, i)
    out = [
        Tensor(
            f"{a}.in_proj", "attention", 2 * inter + heads, h, shard="col", role="linear", layer=i
        ),
        Tensor(
            f"{a}.in_proj",
            "attention",
            2 * g * n,
            h,
            shard="groups",
            role="linear",
            layer=i,
            heads=g,
        ),
        Tensor(f"{a}.conv1d", "attention", inter, k, shard="col", layer=i),
        Tensor(f"{a}.conv1d", "attention", 2 * g * n, k, shard="groups", layer=i, heads=g),
        Tensor(f"{a}.A_log", "attention", heads, shard="col", layer=i, dtype="float32"),
        Tensor(f"{a}.D", "attention", heads, shard="col", layer=i),
        Tensor(f"{a}.dt_bias", "attention", heads, shard="col", layer=i),
        Tensor(f"{a}.norm", "attention", inter, shard="col", layer=i),
        Tensor(f"{a}.out_proj", "attention", h, inter, shard="row", role="linear", layer=i),
    ]
    if t.bool("use_conv_bias", "mamba_conv_bias", default=True):
        out += [
            Tensor(f"{a}.conv1d.bias", "attention", inter, shard="col", layer=i),
            Tensor(f"{a}.conv1d.bias", "attention", 2 * g * n, shard="groups", layer=i, heads=g),
        ]
    if t.bool("mamba_proj_bias", "use_bias", default=False):
        out += [
            Tensor(
                f"{a}.in_proj.bias",
                "attention",
                2 * inter + heads + 2 * g * n,
                shard="col",
                layer=i,
            ),
            Tensor(f"{a}.out_proj.bias", "attention", h, layer=i),
        ]
    return out


def _mamba1(m: Mamba2, h: int, a: str, t: Fields, i: int) -> list[Tensor]:
    # Jamba's Mamba-1 mixer: in_proj (x, z), conv1d, x_proj -> (dt, B, C), dt_proj, A, D.
    inter, n = m.intermediate_size, m.state_size
    dt_rank = t.opt_int("mamba_dt_rank", minimum=1) or ceil(h / 16)
    return [
        Tensor(f"{a}.in_proj", "attention", 2 * inter, h, shard="col", role="linear", layer=i),
        Tensor(f"{a}.conv1d", "attention", inter, m.conv_kernel, shard="col", layer=i),
        Tensor(f"{a}.conv1d.bias", "attention", inter, shard="col", layer=i),
        Tensor(
            f"{a}.x_proj", "attention", dt_rank + 2 * n, inter, shard="row", role="linear", layer=i
        ),
        Tensor(f"{a}.dt_proj", "attention", inter, dt_rank, shard="col", role="linear", layer=i),
        Tensor(f"{a}.dt_proj.bias", "attention", inter, shard="col", layer=i),
        Tensor(f"{a}.A_log", "attention", inter * n, shard="col", layer=i, dtype="float32"),
        Tensor(f"{a}.D", "attention", inter, shard="col", layer=i),
        Tensor(f"{a}.out_proj", "attention", h, inter, shard="row", role="linear", layer=i),
    ]


def _kda(m: KDA, h: int, p: str, t: Fields, i: int) -> list[Tensor]:
    # sglang/srt/models/kimi_linear.py:KimiDeltaAttention (unfused path): q/k/v column-
    # parallel, f/g low-rank gates (a: replicated, b: column) or full-rank, beta (b_proj),
    # q/k/v short convs (fp32), A_log, dt_bias (fp32), o_norm, o_proj.
    a = f"{p}.self_attn"
    proj, hd, heads = m.num_heads * m.head_dim, m.head_dim, m.num_heads
    lac = Fields(t.dict("linear_attn_config") or {})
    out = [
        Tensor(f"{a}.{x}_proj", "attention", proj, h, shard="col", role="linear", layer=i)
        for x in "qkv"
    ]
    out += [
        Tensor(
            f"{a}.{x}_conv1d",
            "attention",
            proj,
            m.conv_kernel,
            shard="col",
            layer=i,
            dtype="float32",
        )
        for x in "qkv"
    ]
    if lac.bool("use_full_rank_gate", default=False):
        out += [
            Tensor(f"{a}.{x}_proj", "attention", proj, h, shard="col", role="linear", layer=i)
            for x in "fg"
        ]
    else:
        for x in "fg":
            out += [
                Tensor(f"{a}.{x}_a_proj", "attention", hd, h, role="linear", layer=i),
                Tensor(
                    f"{a}.{x}_b_proj", "attention", proj, hd, shard="col", role="linear", layer=i
                ),
            ]
    return out + [
        Tensor(f"{a}.b_proj", "attention", heads, h, shard="col", role="linear", layer=i),
        Tensor(f"{a}.A_log", "attention", heads, shard="col", layer=i, dtype="float32"),
        Tensor(f"{a}.dt_bias", "attention", proj, shard="col", layer=i, dtype="float32"),
        Tensor(f"{a}.o_norm", "attention", hd, layer=i),
        Tensor(f"{a}.o_proj", "attention", h, proj, shard="row", role="linear", layer=i),
    ]


def _short_conv(m: ShortConv, h: int, p: str, t: Fields, i: int) -> list[Tensor]:
    # sglang/srt/models/lfm2.py:ShortConv: in_proj -> (B, C, x), depthwise conv, out_proj.
    a = f"{p}.conv"
    out = [
        Tensor(
            f"{a}.in_proj", "attention", 3 * m.hidden_size, h, shard="col", role="linear", layer=i
        ),
        Tensor(f"{a}.conv", "attention", m.hidden_size, m.l_cache, shard="col", layer=i),
        Tensor(f"{a}.out_proj", "attention", h, m.hidden_size, shard="row", role="linear", layer=i),
    ]
    if t.bool("conv_bias", default=False):
        out += [
            Tensor(f"{a}.in_proj.bias", "attention", 3 * m.hidden_size, shard="col", layer=i),
            Tensor(f"{a}.out_proj.bias", "attention", h, layer=i),
        ]
    return out


def _lightning(m: LightningAttention, h: int, p: str, i: int) -> list[Tensor]:
    # MiniMax-Text-01 / M1 linear attention (HF modeling_minimax): qkv, output gate, norm, out.
    a = f"{p}.self_attn"
    proj = m.num_heads * m.head_dim
    return [
        Tensor(f"{a}.qkv_proj", "attention", 3 * proj, h, shard="col", role="linear", layer=i),
        Tensor(f"{a}.output_gate", "attention", proj, h, shard="col", role="linear", layer=i),
        Tensor(f"{a}.norm", "attention", proj, shard="col", layer=i),
        Tensor(f"{a}.out_proj", "attention", h, proj, shard="row", role="linear", layer=i),
    ]


def mixer_tensors(m: Any, h: int, p: str, spec: ModelSpec, names: _Naming, i: int) -> list[Tensor]:
    t = _cfg(spec)
    if isinstance(m, GatedDeltaNet):
        return _gdn(m, h, p, names.qwen35, i)
    if isinstance(m, Mamba2):
        return _mamba2(m, h, f"{p}.{names.mixer['mamba2']}", t, i)
    if isinstance(m, MLA):
        return _mla(m, h, p, t, i)
    if isinstance(m, FullAttention):
        return _gqa(m, h, p, spec, t, i)
    if isinstance(m, KDA):
        return _kda(m, h, p, t, i)
    if isinstance(m, ShortConv):
        return _short_conv(m, h, p, t, i)
    if isinstance(m, LightningAttention):
        return _lightning(m, h, p, i)
    return []


# ------------------------------------------------------------------------------ FFN


def _gated(spec: ModelSpec, t: Fields) -> bool:
    act = t.get("mlp_hidden_act", "hidden_act")
    return not (spec.model_type == "nemotron_h" or act == "relu2")


def _mlp(
    inter: int,
    h: int,
    a: str,
    part: str,
    gated: bool,
    bias: bool,
    i: int | None,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
) -> list[Tensor]:
    g, u, d = names
    out = [
        Tensor(f"{a}.{u}", part, inter, h, shard="col", role="linear", layer=i),
        Tensor(f"{a}.{d}", part, h, inter, shard="row", role="linear", layer=i),
    ]
    if gated:
        out.insert(0, Tensor(f"{a}.{g}", part, inter, h, shard="col", role="linear", layer=i))
    if bias:
        out += [
            Tensor(f"{a}.{u}.bias", part, inter * (2 if gated else 1), shard="col", layer=i),
            Tensor(f"{a}.{d}.bias", part, h, layer=i),
        ]
    return out


def _latent(spec: ModelSpec, t: Fields) -> int | None:
    return t.opt_int("moe_latent_size", "routed_expert_hidden_size", minimum=1)


def _moe(
    f: MoE, h: int, p: str, spec: ModelSpec, names: _Naming, t: Fields, i: int
) -> list[Tensor]:
    # Routed experts: FusedMoE w13 (gate+up) column-split and w2 row-split by the MoE-TP size,
    # experts split by EP (sglang/srt/layers/moe/fused_moe_triton/layer.py:FusedMoE).
    a = f"{p}.{names.ffn}"
    gated = _gated(spec, t)
    latent = _latent(spec, t)
    eh = latent or h  # experts of a latent MoE run in the latent width
    e, inter = f.num_experts, f.expert_intermediate_size
    ex = f"{a}.experts"
    out = [
        Tensor(
            ex,
            "experts",
            inter * (2 if gated else 1),
            eh,
            count=e,
            shard="col",
            role="expert",
            layer=i,
        ),
        Tensor(ex, "experts", eh, inter, count=e, shard="row", role="expert", layer=i),
    ]
    if spec.model_type == "gpt_oss":  # expert biases
        out += [
            Tensor(f"{ex}.bias", "experts", 2 * inter, count=e, shard="col", role="none", layer=i),
            Tensor(f"{ex}.bias", "experts", eh, count=e, shard="rep", role="none", layer=i),
        ]
    router = "router" if spec.model_type == "gpt_oss" else "gate"
    out.append(Tensor(f"{a}.{router}", "dense_ffn", e, h, layer=i))
    if spec.model_type == "gpt_oss":
        out.append(Tensor(f"{a}.{router}.bias", "dense_ffn", e, layer=i))
    if t.has("topk_method", "n_group") or spec.model_type in ("nemotron_h", "kimi_linear"):
        # noaux_tc routing keeps an fp32 e_score_correction_bias per expert
        out.append(
            Tensor(f"{a}.gate.e_score_correction_bias", "dense_ffn", e, layer=i, dtype="float32")
        )
    if f.num_shared_experts and f.shared_intermediate_size:
        s_inter = f.num_shared_experts * f.shared_intermediate_size
        s_name = (
            f"{a}.shared_expert"
            if t.has("shared_expert_intermediate_size")
            else (
                f"{a}.shared_mlp"
                if spec.model_type == "granitemoehybrid"
                else f"{a}.shared_experts"
            )
        )
        out += _mlp(s_inter, h, s_name, "dense_ffn", gated, False, i)
        if t.has("shared_expert_intermediate_size"):  # Qwen's sigmoid shared-expert gate
            out.append(Tensor(f"{a}.shared_expert_gate", "dense_ffn", 1, h, layer=i))
    if latent:
        # Nemotron-H fc1/fc2_latent_proj, Kimi-K3 routed_expert_down/up_proj: ReplicatedLinear
        out += [
            Tensor(f"{a}.fc1_latent_proj", "dense_ffn", latent, h, role="linear", layer=i),
            Tensor(f"{a}.fc2_latent_proj", "dense_ffn", h, latent, role="linear", layer=i),
        ]
        if t.bool("latent_moe_use_norm", default=False):
            out.append(Tensor(f"{a}.routed_expert_norm", "dense_ffn", latent, layer=i))
    return out


def ffn_tensors(f: Any, h: int, p: str, spec: ModelSpec, names: _Naming, i: int) -> list[Tensor]:
    t = _cfg(spec)
    if isinstance(f, MoE):
        return _moe(f, h, p, spec, names, t, i)
    if isinstance(f, DenseMLP):
        a = f"{p}.{names.ffn}"
        if spec.model_type == "granitemoehybrid":
            a = f"{p}.shared_mlp"
        mlp_names = (
            ("w1", "w3", "w2")
            if spec.model_type.startswith("lfm2")
            else ("gate_proj", "up_proj", "down_proj")
        )
        return _mlp(
            f.intermediate_size,
            h,
            a,
            "dense_ffn",
            _gated(spec, t),
            t.bool("mlp_bias", default=False),
            i,
            mlp_names,
        )
    return []


# ------------------------------------------------------------------------------ layers


def layer_tensors(
    layer: Layer, spec: ModelSpec, names: _Naming, prefix: str | None = None
) -> list[Tensor]:
    h, i = spec.hidden_size, layer.index
    p = prefix or names.layer(i)
    out: list[Tensor] = []
    for m in layer.mixers:
        out += mixer_tensors(m, h, p, spec, names, i)
    out += ffn_tensors(layer.ffn, h, p, spec, names, i)
    # Pre-norms: one per block; a layer with a mixer and an FFN has two (input_layernorm,
    # post_attention_layernorm). Nemotron-H / Mamba2 LM blocks hold one.
    n_norms = int(bool(layer.mixers)) + int(layer.ffn is not None)
    out += [Tensor(f"{p}.norm{k}", "norms", h, layer=i) for k in range(max(n_norms, 1))]
    return out


def _mtp(spec: ModelSpec, names: _Naming) -> list[Tensor]:
    """MTP / NextN draft modules as stored in the checkpoint."""
    if spec.mtp_layers <= 0:
        return []
    h = spec.hidden_size
    t = _cfg(spec)
    attn = next((m for lyr in spec.layers for m in lyr.mixers if m.has_kv), None)
    moe = next((lyr.ffn for lyr in spec.layers if isinstance(lyr.ffn, MoE)), None)
    dense = next((lyr.ffn for lyr in spec.layers if isinstance(lyr.ffn, DenseMLP)), None)
    ffn = moe or dense
    out: list[Tensor] = []
    if spec.mtp_source == "mtp_num_hidden_layers":
        # Qwen3-Next / Qwen3.5 (sglang/srt/models/qwen3_5_mtp.py): fc (2h -> h, plain
        # nn.Linear), pre_fc_norm_embedding / pre_fc_norm_hidden, N decoder layers (full
        # attention + the model's FFN), final norm. Embedding and LM head are shared.
        out += [
            Tensor("mtp.fc", "mtp", h, 2 * h, place="mtp"),
            Tensor("mtp.pre_fc_norm_embedding", "mtp", h, place="mtp"),
            Tensor("mtp.pre_fc_norm_hidden", "mtp", h, place="mtp"),
            Tensor("mtp.norm", "mtp", h, place="mtp"),
        ]
        for j in range(spec.mtp_layers):
            lyr = Layer(index=j, mixer=attn, ffn=ffn)
            out += layer_tensors(lyr, spec, names, prefix=f"mtp.layers.{j}")
    else:
        # DeepSeek NextN (sglang/srt/models/deepseek_nextn.py): enorm, hnorm, eh_proj
        # (replicated), one decoder layer, shared_head.norm; the checkpoint also stores copies of
        # embed_tokens and shared_head.head, which the engine replaces by the target's.
        # Nemotron-H MTP: the blocks of mtp_hybrid_override_pattern / mtp_layers_block_type.
        n = spec.num_layers
        blocks = _nemotron_mtp_blocks(spec, t, attn, moe, dense)
        for j in range(spec.mtp_layers):
            p = f"mtp.layers.{j}" if blocks else f"{names.root}layers.{n + j}"
            out += [
                Tensor(f"{p}.eh_proj", "mtp", h, 2 * h, place="mtp"),
                Tensor(f"{p}.enorm", "mtp", h, place="mtp"),
                Tensor(f"{p}.hnorm", "mtp", h, place="mtp"),
                Tensor(f"{p}.shared_head.norm", "mtp", h, place="mtp"),
            ]
            for k, lyr in enumerate(blocks or [Layer(index=j, mixer=attn, ffn=ffn)]):
                out += layer_tensors(lyr, spec, names, prefix=f"{p}.block{k}" if blocks else p)
            if not blocks:
                out += [
                    Tensor(
                        f"{p}.embed_tokens", "mtp", spec.vocab_size, h, place="mtp", shared=True
                    ),
                    Tensor(
                        f"{p}.shared_head.head", "mtp", spec.vocab_size, h, place="mtp", shared=True
                    ),
                ]
    return [
        Tensor(
            x.name,
            "mtp",
            x.out,
            x.inp,
            x.count,
            x.shard,
            x.role,
            None,
            "mtp",
            x.heads,
            x.dtype,
            x.shared,
        )
        for x in out
    ]


def _nemotron_mtp_blocks(
    spec: ModelSpec, t: Fields, attn: Any, moe: Any, dense: Any
) -> list[Layer]:
    if spec.model_type != "nemotron_h":
        return []
    pattern = t.get("mtp_hybrid_override_pattern")
    kinds = (
        list(pattern)
        if isinstance(pattern, str)
        else [
            str(x)
            for x in (t.get("mtp_layers_block_type") or ["attention", "moe"])
            if isinstance(x, str)
        ]
    )
    table = {
        "*": (attn, None),
        "attention": (attn, None),
        "E": (None, moe),
        "moe": (None, moe),
        "-": (None, dense),
        "mlp": (None, dense),
    }
    return [
        Layer(index=k, mixer=table[c][0], ffn=table[c][1])
        for k, c in enumerate(kinds)
        if c in table
    ]


# ------------------------------------------------------------------------------ vision


def _vi(v: Fields, *keys: str, default: int) -> int:
    value = v.get(*keys)
    if value is None:
        return default
    if isinstance(value, list) and value and all(isinstance(x, int) for x in value):
        return prod(as_int(x, keys[0]) for x in value)
    return as_int(value, f"vision_config.{keys[0]}")


def _vision(spec: ModelSpec) -> list[Tensor]:
    """Estimate the vision tower from vision_config (Qwen3-VL/3.5 ViT, SigLIP, MoonViT).

    Per block: LayerNorm x2 (w+b), fused qkv (+bias), proj (+bias), a 2-matrix GELU MLP (+bias);
    plus the patch embedding (in_channels x temporal_patch x patch^2 -> hidden), learned position
    embeddings, and a merger/projector that maps `merge^2` patches to the text width
    (Qwen3-VL: LN + fc1 (h*m^2 -> h*m^2) + fc2 (-> out_hidden_size); deepstack mergers likewise;
    LFM2-VL: projector_hidden_size in the middle). TP sharding as SGLang's Qwen3-VL vision model
    (sglang/srt/models/qwen3_vl.py: qkv/fc1 column, proj/fc2 row, norms replicated).
    Checked against the Qwen3.5-27B bf16 checkpoint size (see tests/model/test_weights.py).
    """
    vc = spec.vision_config
    if not isinstance(vc, dict) or not vc:
        return []
    v = Fields(vc, "vision_config")
    top = Fields(spec.raw_config if isinstance(spec.raw_config, dict) else {})
    depth = _vi(v, "depth", "num_hidden_layers", "vt_num_hidden_layers", "num_layers", default=0)
    hid = _vi(v, "hidden_size", "vt_hidden_size", "embed_dim", "width", default=0)
    if depth == 0 or hid == 0:
        return []
    inter = _vi(v, "intermediate_size", "vt_intermediate_size", "mlp_dim", default=4 * hid)
    patch = _vi(v, "patch_size", "spatial_patch_size", default=14)
    chans = _vi(v, "in_channels", "num_channels", "in_chans", default=3)
    temporal = _vi(v, "temporal_patch_size", default=1)
    n_pos = _vi(v, "num_position_embeddings", "num_patches", default=0)
    if not n_pos and v.has("image_size"):
        n_pos = (_vi(v, "image_size", default=224) // patch) ** 2
    if not n_pos and v.has("init_pos_emb_height"):
        n_pos = _vi(v, "init_pos_emb_height", default=0) * _vi(v, "init_pos_emb_width", default=0)
    merge = (
        _vi(v, "spatial_merge_size", default=0) ** 2
        or _vi(v, "merge_kernel_size", default=0)
        or (_vi(top, "downsample_factor", default=1) ** 2)
    )
    text_h = _vi(v, "out_hidden_size", "text_hidden_size", default=spec.hidden_size)
    mid = _vi(top, "projector_hidden_size", default=hid * merge)
    n_deep = len(v.get("deepstack_visual_indexes") or [])

    def T(name: str, out: int, inp: int = 1, shard: str = "rep", role: str = "none") -> Tensor:
        return Tensor(
            f"model.visual.{name}", "vision", out, inp, shard=shard, role=role, place="first"
        )

    out = [
        T("patch_embed.proj", hid, chans * temporal * patch * patch),
        T("patch_embed.proj.bias", hid),
    ]
    if n_pos:
        out.append(T("pos_embed", n_pos, hid, shard="col"))
    blk = [
        T("blocks.norm", 4 * hid),
        T("blocks.attn.qkv", 3 * hid, hid, "col", "vision"),
        T("blocks.attn.qkv.bias", 3 * hid, 1, "col"),
        T("blocks.attn.proj", hid, hid, "row", "vision"),
        T("blocks.attn.proj.bias", hid),
        T("blocks.mlp.linear_fc1", inter, hid, "col", "vision"),
        T("blocks.mlp.linear_fc1.bias", inter, 1, "col"),
        T("blocks.mlp.linear_fc2", hid, inter, "row", "vision"),
        T("blocks.mlp.linear_fc2.bias", hid),
    ]
    out += [
        Tensor(x.name, x.part, x.out, x.inp, depth, x.shard, x.role, None, "first") for x in blk
    ]
    cat = hid * merge
    for k in range(1 + n_deep):
        name = "merger" if k == 0 else f"deepstack_merger_list.{k - 1}"
        out += [
            T(f"{name}.norm", 2 * (hid if k == 0 else cat)),
            T(f"{name}.linear_fc1", mid, cat, "col", "vision"),
            T(f"{name}.linear_fc1.bias", mid, 1, "col"),
            T(f"{name}.linear_fc2", text_h, mid, "row", "vision"),
            T(f"{name}.linear_fc2.bias", text_h),
        ]
    return out


# ------------------------------------------------------------------------------ public


def tensors(spec: ModelSpec) -> list[Tensor]:
    """Every weight of the model: decoder layers, embeddings, vision tower, MTP modules."""
    names = _Naming(spec)
    h = spec.hidden_size
    out = [
        Tensor(
            names.embed,
            "embedding",
            spec.vocab_size,
            h,
            shard="vocab",
            role="embedding",
            place="first",
        )
    ]
    # Zamba2 "hybrid" layers reuse num_mem_blocks shared attention+MLP blocks: count them once.
    shared_blocks = _cfg(spec).opt_int("num_mem_blocks") if spec.model_type == "zamba2" else None
    hybrids = 0
    for layer in spec.layers:
        if shared_blocks is not None and layer.parallel_mixer is not None:
            hybrids += 1
            if hybrids > shared_blocks:
                layer = Layer(index=layer.index, mixer=layer.mixer)
        out += layer_tensors(layer, spec, names)
    out.append(Tensor(names.final_norm, "norms", h, place="last"))
    if not spec.tie_word_embeddings:
        out.append(
            Tensor(
                "lm_head",
                "lm_head",
                spec.vocab_size,
                h,
                shard="vocab",
                role="lm_head",
                place="last",
            )
        )
    out += _vision(spec)
    out += _mtp(spec, names)
    return out


def count_params(spec: ModelSpec) -> ParamCount:
    """Parameters per part, as stored in the checkpoint (elements; lm_head 0 when tied).
    (A raw config dict: `build_model_spec(config, ...).params`.)"""
    sums = dict.fromkeys(PARTS, 0)
    for x in tensors(spec):
        sums[x.part] += x.numel
    return ParamCount(**sums)
