"""The architectures a vLLM release older than the mirrored range registers: archs_0_8_5.txt -
archs_0_9_2.txt (tools/extract_architectures.py on each wheel's
vllm/model_executor/models/registry.py:_VLLM_MODELS). Those releases are planned with 0.10.0's
profile, but a model is checked against the release's own list, and a release older than every
list against the oldest (0.8.5's)."""

from __future__ import annotations

import pytest

from servefit import catalog
from servefit.model.config import read_json
from servefit.model.inventory import build_model_spec
from tests.engines.release_archs import refusal

NANO = "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"


def _refused(engine: str, file: str) -> str | None:
    return refusal(engine, build_model_spec(read_json(catalog.DATA / file), name=file, source=file))


@pytest.mark.parametrize(
    ("engine", "refused"),
    [
        ("vllm==0.8.0", True),  # older than every list: 0.8.5's
        ("vllm==0.8.5", True),  # archs_0_8_5.txt: no NemotronHForCausalLM
        ("vllm==0.8.5.post1", True),
        ("vllm==0.9.0.1", True),
        ("vllm==0.9.1", False),  # models/nemotron_h.py is new in 0.9.1
        ("vllm==0.9.2", False),
    ],
)
def test_nemotron_h_is_registered_from_0_9_1(engine, refused):
    error = _refused(engine, NANO)
    assert (error is not None) is refused, error
    if refused:
        assert error.startswith(
            "ValueError: Model architectures ['NemotronHForCausalLM'] are not supported for now."
        )
