"""Hand-built ModelSpecs for engine tests, so the engine mirror is tested apart from the
config parser. Every number is from the config file or log named next to it."""

from __future__ import annotations

from servefit import catalog
from servefit.hardware.spec import GPUSet, GPUSpec
from servefit.model.config import read_json
from servefit.model.layers import DenseMLP, FullAttention, GatedDeltaNet, Layer
from servefit.model.spec import ModelSpec


def qwen36_27b() -> ModelSpec:
    """Qwen3.6-27B architecture from the bundled nvidia__Qwen3.6-27B-NVFP4.json:
    64 layers, every 4th full attention (q 24 / kv 4 heads, head_dim 256), GDN k16/v48 heads of
    dim 128, conv kernel 4, mamba_ssm_dtype float32, vision depth 27 / hidden 1152."""
    cfg = read_json(catalog.DATA / "nvidia__Qwen3.6-27B-NVFP4.json")
    layers = []
    for i in range(64):
        if (i + 1) % 4 == 0:
            mixer = FullAttention(num_heads=24, num_kv_heads=4, head_dim=256, v_head_dim=256)
        else:
            mixer = GatedDeltaNet.from_heads(16, 48, 128, 128, 4)
        layers.append(Layer(index=i, mixer=mixer, ffn=DenseMLP(17408)))
    return ModelSpec(
        name="Qwen/Qwen3.6-27B",
        architecture="Qwen3_5ForConditionalGeneration",
        model_type="qwen3_5_text",
        dtype="bfloat16",
        hidden_size=5120,
        vocab_size=248320,
        max_position_embeddings=262144,
        layers=tuple(layers),
        mtp_layers=1,
        mtp_source="mtp_num_hidden_layers",
        mamba_ssm_dtype="float32",
        is_multimodal=True,
        vision_config=cfg["vision_config"],
        text_config=cfg["text_config"],
        raw_config=cfg,
    )


def dense(
    name: str,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    ctx: int = 131072,
    arch: str = "Qwen2ForCausalLM",
) -> ModelSpec:
    lyr = tuple(
        Layer(
            index=i,
            mixer=FullAttention(
                num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, v_head_dim=head_dim
            ),
            # the MLP's size is not what these tests are about (their weights are calibrated or
            # negligible): 0 splits over every TP, where a placeholder of 1 would not
            ffn=DenseMLP(0),
        )
        for i in range(layers)
    )
    return ModelSpec(
        name=name,
        architecture=arch,
        model_type="qwen2",
        dtype="bfloat16",
        hidden_size=heads * head_dim,
        vocab_size=152064,
        max_position_embeddings=ctx,
        layers=lyr,
        text_config={"max_position_embeddings": ctx},
    )


def gpus(name: str, mib: int, count: int) -> GPUSet:
    return GPUSet(
        gpu=GPUSpec(
            key=name.lower(), name=name, memory_mib=mib, bandwidth_gbs=1.0, bf16_tflops=1.0
        ),
        count=count,
    )
