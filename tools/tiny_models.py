#!/usr/bin/env python3
"""Generate tiny random models and tokenizers for the real-engine tests; nothing is downloaded.

    <engine-venv>/bin/python tools/tiny_models.py OUT_DIR [NAME ...]

Runs inside an engine venv (it needs torch, transformers and tokenizers, which vLLM brings).
Each model is a config built here, random bf16 weights (seeded) saved by transformers'
save_pretrained, a byte-level BPE tokenizer trained with `tokenizers` on text generated here, and a
chat template. The models:

  qwen35-tiny   Qwen3_5ForConditionalGeneration: 3 Gated DeltaNet layers + 1 full-attention layer
                and a one-block vision tower (vLLM 0.24.0 registers no text-only Qwen3.5), with
                its processor saved.
  qwen3next-tiny Qwen3NextForCausalLM: the same 3+1 layout with a sparse MoE in every layer.
  qwen3-tiny    Qwen3ForCausalLM: four dense full-attention layers.
  llama-tiny    LlamaForCausalLM: the same dense layout.
  qwen2-tiny    Qwen2ForCausalLM: the same, with heads of 64 (see below).
  qwen3moe-tiny Qwen3MoeForCausalLM: four attention layers, 8 experts top-2 in each.
  mistral-sw-tiny MistralForCausalLM: four layers, each a 1024-token sliding window.
  gemma3-tiny   Gemma3ForCausalLM: five 512-token sliding-window layers, then a global one.
  nemotronh-tiny NemotronHForCausalLM: pattern "M-M*-" (Mamba2, MLP, Mamba2, attention, MLP).
  granitemoehybrid-tiny GraniteMoeHybridForCausalLM: Mamba2, attention, Mamba2, Mamba2; MoE.
  falconh1-tiny FalconH1ForCausalLM: attention and Mamba2 side by side in four layers.
  lfm2-tiny     Lfm2ForCausalLM: conv, conv, attention, conv (block_dim and conv_dim set, as
                checkpoints do; tied embeddings).
  mamba2-tiny   Mamba2ForCausalLM: four Mamba2 layers, no attention.
  jamba-tiny    JambaForCausalLM: Mamba (v1), Mamba + MoE, attention, Mamba + MoE (4 experts
                top-2; state 16). vLLM's CPU build starts it but fails its first request: it
                has no Mamba1 selective-scan kernel.
  zamba2-tiny   Zamba2ForCausalLM: Mamba2, hybrid, Mamba2, hybrid (a hybrid layer runs the one
                shared attention + MLP block on [hidden, embedding], then Mamba2; tied
                embeddings).
Attention: 4 query heads, 2 KV heads of 128 (the config's head_dim); Qwen2, GraniteMoeHybrid, Lfm2
and Jamba heads of 64, as vLLM takes hidden / heads for them (Zamba2: 4 heads of 128 over 2 x
hidden). Mamba2 mixers: 8 heads x 64, one group, state 64, kernel 4.

vLLM 0.24.0's CPU build starts all but two (Jamba: its Mamba1 profile run fails; GraniteMoeHybrid:
its transformers names the layers linear_attention/full_attention, which vLLM 0.24.0 does not
know) and serves no request on a Mamba2 or short-conv layer (those kernels need Triton).

Linear-attention head dims are 128: vLLM's CPU Gated DeltaNet kernel accepts only real head dims
("Unexpected head dim size, 32" at the first request otherwise).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

VOCAB = 1024  # config vocab; the trained tokenizer uses fewer ids
MAX_POSITIONS = 65536
SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
    "<think>", "</think>", "<tool_call>", "</tool_call>",
]
IDS = {tok: i for i, tok in enumerate(SPECIAL)}

# The Qwen chat format (<|im_start|>role ... <|im_end|>), kept minimal.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_TEXT = (
    "the a of to and in is it that for on with as was at by be this are from or have an they "
    "which one you were all we can her has there been if more when will would who so no out up "
    "into memory model engine server token cache block layer request batch start ready plan "
    "state attention linear expert vision image text answer question number value time first "
    "last long short small large fast slow check fit launch stop log line error warning"
)


def corpus(n_lines: int = 4000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    vocab = _TEXT.split()
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(vocab) for _ in range(rng.randint(4, 16))]
        if rng.random() < 0.3:
            words.append(str(rng.randint(0, 99999)))
        lines.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ",", ":"]))
    return lines


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB - 24, special_tokens=SPECIAL, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    assert tok.get_vocab_size() <= VOCAB
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token=None, bos_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = MAX_POSITIONS
    fast.save_pretrained(out)


def _text_common() -> dict:
    return dict(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=128,
        max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-6, tie_word_embeddings=False,
        eos_token_id=IDS["<|im_end|>"], pad_token_id=IDS["<|endoftext|>"],
        bos_token_id=IDS["<|endoftext|>"],
    )


def _heads_from_hidden() -> dict:
    # for the vLLM model classes that take the attention head dim as hidden / heads whatever the
    # config's head_dim says (Qwen2, GraniteMoeHybrid, Lfm2, Jamba): 4 heads x 64, as their
    # checkpoints are; a head_dim of 128 here loads without an error and sizes the KV cache wrong
    return {k: v for k, v in _text_common().items() if k != "head_dim"}


def _linear() -> dict:
    # 3 Gated DeltaNet layers then 1 full-attention layer; real head dims (128).
    return dict(
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        full_attention_interval=4, linear_conv_kernel_dim=4,
        linear_key_head_dim=128, linear_value_head_dim=128,
        linear_num_key_heads=2, linear_num_value_heads=4,
    )


def qwen3_dense():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(**_text_common(), rope_theta=1000000.0)
    return cfg, Qwen3ForCausalLM


def qwen3_next():
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    cfg = Qwen3NextConfig(
        **_text_common(), **_linear(), partial_rotary_factor=0.25, rope_theta=10000000.0,
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128,
        shared_expert_intermediate_size=128, decoder_sparse_step=1, norm_topk_prob=True,
        mlp_only_layers=[])
    return cfg, Qwen3NextForCausalLM


def qwen35():
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    text = dict(
        **_text_common(), **_linear(), attn_output_gate=True, model_type="qwen3_5_text",
        mamba_ssm_dtype="float32",
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                         "partial_rotary_factor": 0.25, "mrope_interleaved": True,
                         "mrope_section": [6, 5, 5]},
    )
    vision = dict(
        depth=1, hidden_size=64, intermediate_size=128, num_heads=2, in_channels=3,
        patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=256,
        num_position_embeddings=64, deepstack_visual_indexes=[], hidden_act="gelu_pytorch_tanh",
    )
    cfg = Qwen3_5Config(
        text_config=text, vision_config=vision, tie_word_embeddings=False,
        image_token_id=IDS["<|image_pad|>"], video_token_id=IDS["<|video_pad|>"],
        vision_start_token_id=IDS["<|vision_start|>"], vision_end_token_id=IDS["<|vision_end|>"])
    return cfg, Qwen3_5ForConditionalGeneration


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaConfig(**_text_common(), rope_theta=500000.0), LlamaForCausalLM


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2Config(**_heads_from_hidden(), rope_theta=1000000.0), Qwen2ForCausalLM


def qwen3_moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    cfg = Qwen3MoeConfig(**_text_common(), rope_theta=1000000.0, num_experts=8,
                         num_experts_per_tok=2, moe_intermediate_size=128, decoder_sparse_step=1,
                         norm_topk_prob=True, mlp_only_layers=[])
    return cfg, Qwen3MoeForCausalLM


def mistral_sliding_window():
    # every layer attends over a 1024-token window (Mistral-7B-v0.1's layout, 4096 there)
    from transformers import MistralConfig, MistralForCausalLM

    cfg = MistralConfig(**_text_common(), sliding_window=1024, rope_theta=10000.0)
    return cfg, MistralForCausalLM


def gemma3():
    # Gemma 3's interleaving: five sliding-window (local) layers, then one global layer
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    common = {**_text_common(), "num_hidden_layers": 6}
    cfg = Gemma3TextConfig(
        **common, sliding_window=512,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        query_pre_attn_scalar=128)
    return cfg, Gemma3ForCausalLM


def _mamba2_dims() -> dict:
    # 8 heads x 64 = 512 = 2 x hidden; one group, state 64, kernel 4
    return dict(n_groups=1, state=64, heads=8, head_dim=64, conv=4)


def nemotron_h():
    # M = Mamba2 mixer, * = attention, - = MLP (NemotronH's hybrid_override_pattern)
    from transformers import NemotronHConfig, NemotronHForCausalLM

    d = _mamba2_dims()
    common = {**_text_common(), "num_hidden_layers": 5}
    cfg = NemotronHConfig(
        **common, hybrid_override_pattern="M-M*-",
        mamba_num_heads=d["heads"], mamba_head_dim=d["head_dim"], ssm_state_size=d["state"],
        n_groups=d["n_groups"], conv_kernel=d["conv"], expand=2, mlp_hidden_act="relu2")
    return cfg, NemotronHForCausalLM


def granite_moe_hybrid():
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM

    d = _mamba2_dims()
    cfg = GraniteMoeHybridConfig(
        **_heads_from_hidden(), layer_types=["mamba", "attention", "mamba", "mamba"],
        mamba_n_heads=d["heads"], mamba_d_head=d["head_dim"], mamba_d_state=d["state"],
        mamba_n_groups=d["n_groups"], mamba_d_conv=d["conv"], mamba_expand=2,
        num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=256,
        position_embedding_type="rope")
    return cfg, GraniteMoeHybridForCausalLM


def falcon_h1():
    # every layer runs attention and a Mamba2 mixer side by side
    from transformers import FalconH1Config, FalconH1ForCausalLM

    d = _mamba2_dims()
    cfg = FalconH1Config(
        **_text_common(), mamba_n_heads=d["heads"], mamba_d_head=d["head_dim"],
        mamba_d_ssm=d["heads"] * d["head_dim"], mamba_d_state=d["state"],
        mamba_n_groups=d["n_groups"], mamba_d_conv=d["conv"], mamba_expand=2)
    return cfg, FalconH1ForCausalLM


def lfm2():
    # short-conv layers and attention layers; vLLM's Lfm2 layers read block_dim, conv_dim and
    # conv_dim_out, which transformers' Lfm2Config does not define: the released checkpoints carry
    # them (block_dim and conv_dim are the hidden size). vLLM always ties lm_head to the embedding.
    from transformers import Lfm2Config, Lfm2ForCausalLM

    drop = ("rms_norm_eps", "tie_word_embeddings")
    common = {k: v for k, v in _heads_from_hidden().items() if k not in drop}
    cfg = Lfm2Config(
        **common, tie_word_embeddings=True, norm_eps=1e-5, block_dim=256, block_ff_dim=512,
        block_multiple_of=256, block_auto_adjust_ff_dim=False, block_ffn_dim_multiplier=1.0,
        layer_types=["conv", "conv", "full_attention", "conv"], conv_L_cache=3,
        conv_bias=False, conv_dim=256, conv_dim_out=256)
    return cfg, Lfm2ForCausalLM


def mamba2():
    # attention-free
    from transformers import Mamba2Config, Mamba2ForCausalLM

    d = _mamba2_dims()
    cfg = Mamba2Config(
        vocab_size=VOCAB, hidden_size=256, num_hidden_layers=4, num_heads=d["heads"],
        head_dim=d["head_dim"], state_size=d["state"], n_groups=d["n_groups"],
        conv_kernel=d["conv"], expand=2, tie_word_embeddings=False,
        eos_token_id=IDS["<|im_end|>"], pad_token_id=IDS["<|endoftext|>"],
        bos_token_id=IDS["<|endoftext|>"])
    return cfg, Mamba2ForCausalLM


def jamba():
    # Mamba (v1) mixers with one attention layer (index 2) and MoE in layers 1 and 3
    from transformers import JambaConfig, JambaForCausalLM

    cfg = JambaConfig(
        **_heads_from_hidden(), attn_layer_period=4, attn_layer_offset=2, expert_layer_period=2,
        expert_layer_offset=1, num_experts=4, num_experts_per_tok=2, mamba_d_state=16,
        mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=16)
    return cfg, JambaForCausalLM


def zamba2():
    # Mamba2 layers; "hybrid" layers add the shared transformer block, whose attention runs over
    # the concatenated [hidden, embedding] (2 x hidden = 4 heads x 128). vLLM always ties lm_head
    # to the embedding.
    from transformers import Zamba2Config, Zamba2ForCausalLM

    d = _mamba2_dims()
    cfg = Zamba2Config(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
        layers_block_type=["mamba", "hybrid", "mamba", "hybrid"], num_attention_heads=4,
        num_key_value_heads=4, num_mem_blocks=1, use_shared_attention_adapter=False,
        use_mem_rope=True, n_mamba_heads=d["heads"], mamba_d_state=d["state"],
        mamba_ngroups=d["n_groups"], mamba_d_conv=d["conv"], mamba_expand=2,
        max_position_embeddings=MAX_POSITIONS, tie_word_embeddings=True,
        eos_token_id=IDS["<|im_end|>"], pad_token_id=IDS["<|endoftext|>"],
        bos_token_id=IDS["<|endoftext|>"])
    return cfg, Zamba2ForCausalLM


MODELS = {
    "qwen35-tiny": qwen35, "qwen3next-tiny": qwen3_next, "qwen3-tiny": qwen3_dense,
    "llama-tiny": llama, "qwen2-tiny": qwen2, "qwen3moe-tiny": qwen3_moe,
    "mistral-sw-tiny": mistral_sliding_window, "gemma3-tiny": gemma3,
    "nemotronh-tiny": nemotron_h, "granitemoehybrid-tiny": granite_moe_hybrid,
    "falconh1-tiny": falcon_h1, "lfm2-tiny": lfm2, "mamba2-tiny": mamba2,
    "jamba-tiny": jamba, "zamba2-tiny": zamba2,
}


def save_processor(out: Path) -> None:
    """The image/video processor Qwen3.5's multimodal path loads at start-up."""
    from transformers import AutoProcessor, AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    tok = AutoTokenizer.from_pretrained(out)
    proc = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
        video_processor=Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
        tokenizer=tok, chat_template=CHAT_TEMPLATE)
    proc.save_pretrained(out)
    AutoProcessor.from_pretrained(out)  # loads back


def generate(name: str, out: Path) -> Path:
    import torch

    torch.manual_seed(0)
    cfg, cls = MODELS[name]()
    cfg.torch_dtype = torch.bfloat16
    out.mkdir(parents=True, exist_ok=True)
    model = cls(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    build_tokenizer(out)
    if name == "qwen35-tiny":
        save_processor(out)
    (out / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": IDS["<|im_end|>"], "pad_token_id": IDS["<|endoftext|>"]}) + "\n")
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out, names = Path(argv[0]), argv[1:] or list(MODELS)
    for name in names:
        if name not in MODELS:
            print(f"tiny_models: error: unknown model {name} (known: {', '.join(MODELS)})",
                  file=sys.stderr)
            return 2
        print(generate(name, out / name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
