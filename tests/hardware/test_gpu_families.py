"""hardware/gpus.json "families": a name several cards go by resolves to its first card, and a
plan sized on it names the others (the 94 GB H100 NVL planned as the 80 GB SXM5 is 14 GiB off)."""

from __future__ import annotations

import json

import pytest

from servefit._plan.planner import PlanRequest, plan
from servefit.hardware.catalog import ambiguity_warning, get_gpu, variants_of
from servefit.packagedata import package_dir

FAMILIES = {
    k: v
    for k, v in json.loads(
        (package_dir("servefit.hardware") / "gpus.json").read_text(encoding="utf-8")
    )["families"].items()
    if not k.startswith("_")
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_name_resolves_to_its_first_card(name):
    cards = variants_of(name)
    assert [c.key for c in cards] == FAMILIES[name] and len(cards) >= 2
    assert get_gpu(name).key == cards[0].key
    assert len({c.key for c in cards}) == len(cards)


def test_the_plan_names_the_other_cards_and_a_precise_name_none():
    p = plan(PlanRequest(model="Qwen/Qwen3-8B", gpu="H100", engine="sglang==0.5.23"))
    assert p.warnings[0] == (
        "--gpu H100 names 3 cards; sized as the NVIDIA H100 SXM5 80GB (81,559 MiB). If yours is "
        "another, pass it: h100-pcie (81,559 MiB), h100-nvl (95,830 MiB); or --gpu local"
    )
    for precise in ("h100-nvl", "H100 NVL 94GB", "h20-141g", "A6000"):
        assert ambiguity_warning(precise) is None
    p = plan(PlanRequest(model="Qwen/Qwen3-8B", gpu="h100-nvl", engine="sglang==0.5.23"))
    assert not any("names 3 cards" in w for w in p.warnings)
