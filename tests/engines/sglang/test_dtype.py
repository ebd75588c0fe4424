"""The dtype SGLang loads a model in (engines/sglang/dtype.py), against the engine's code:
sglang/srt/configs/model_config.py:_get_and_verify_dtype (the same in the 0.5.9 ... 0.5.23
wheels; its cast line at INFO / WARNING through 0.5.12, at DEBUG from 0.5.13) and
model_executor/model_runner.py:configure_kv_cache_dtype ("auto": the model dtype). The expected
figures are hand arithmetic on the config.
"""

from __future__ import annotations

import pytest

from servefit import catalog
from servefit._plan.planner import PlanRequest, plan
from servefit.engines import registry
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec

# Qwen3-8B: 36 layers, 8 KV heads of 128 dims, K and V
KV_ELEMENTS_PER_TOKEN = 36 * 2 * 8 * 128
CAST_LOGGED = {"0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1"}


def qwen3_8b(**extra: object):
    cfg = dict(read_json(catalog.DATA / "Qwen__Qwen3-8B.json"))
    cfg.update(extra)
    return build_model_spec(cfg, name="Qwen3-8B (test)", source="test")


def splan(model, version: str, **args):
    args = {"context_length": 8192} | args
    return plan(PlanRequest(model=model, gpu="H100", engine=f"sglang=={version}", args=args))


@pytest.mark.parametrize("version", registry.available()["sglang"])
def test_float32_doubles_the_kv_bytes_and_the_weights_in_every_release(version):
    model = qwen3_8b()
    base = splan(model, version)
    p = splan(model, version, dtype="float32")
    assert base.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * 2
    assert p.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * 4
    assert p.per_rank.weights_gib == pytest.approx(2 * base.per_rank.weights_gib)
    logged = "Upcasting torch.bfloat16 to torch.float32." in p.log_lines
    assert logged == (version in CAST_LOGGED)


@pytest.mark.parametrize(
    ("flag", "log"),
    [("half", "Casting torch.bfloat16 to torch.float16."), ("bfloat16", None), (None, None)],
)
def test_two_byte_dtypes_keep_the_kv_bytes(flag, log):
    p = splan(qwen3_8b(), "0.5.9", **({"dtype": flag} if flag else {}))
    assert p.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * 2
    assert [ln for ln in p.log_lines if "asting" in ln] == ([log] if log else [])


def test_auto_downcasts_a_float32_checkpoint_to_float16_and_gemma_to_bfloat16():
    p = splan(qwen3_8b(torch_dtype="float32"), "0.5.9")
    assert p.pools.kv_bytes_per_token == KV_ELEMENTS_PER_TOKEN * 2
    assert "Downcasting torch.float32 to torch.float16." in p.log_lines
    # the rule reads the text config's model_type only (Qwen3-8B's shapes under a Gemma type)
    g = splan(qwen3_8b(torch_dtype="float32", model_type="gemma2"), "0.5.9")
    assert "Downcasting torch.float32 to torch.bfloat16." in g.log_lines
