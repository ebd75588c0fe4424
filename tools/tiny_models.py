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


MODELS = {"qwen35-tiny": qwen35, "qwen3next-tiny": qwen3_next, "qwen3-tiny": qwen3_dense}


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
