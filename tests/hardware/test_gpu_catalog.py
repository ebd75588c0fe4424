"""GPU catalog: figures, lookups, aliases, unknown-name errors, memory overrides."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from servefit.errors import HardwareError
from servefit.hardware.catalog import (
    entries,
    entry,
    find_gpu,
    generic_gpu,
    get_gpu,
    list_gpus,
    match_nvml_name,
    normalize,
    with_memory_mib,
)
from tests.groundtruth import DATA, GT

ROOT = Path(__file__).resolve().parents[2]

# nvidia-smi memory.total (MiB) given in the brief / seen in tests/data/ (see docs/gpus.md).
MEMORY_MIB = {
    "rtx-a6000": 49140,
    "h100-sxm": 81559,  # tests/data/reference/sglang-memory.md §1.1
    "h200": 143771,  # sglang-memory.md §1.1 and §7
    "rtx-4090": 24564,  # sglang-memory.md §7
    "rtx-5090": 32607,  # ground-truth vllm_qwen36_35b_a3b_nvfp4_1x5090_club612 (nvidia-smi)
    "rtx-5090-d": 32607,  # ground-truth vllm_qwen3coder30b_fp8_pp2_5070ti_5090d_v34076
    "rtx-5070-ti": 16303,  # same case
    "b200": 183359,  # sglang-memory.md §7
    "l4": 23034,
    "a100-80g-sxm": 81920,
    "a100-80g-pcie": 81920,
    "a100-40g-sxm": 40960,
    "a100-40g-pcie": 40960,
}

REQUIRED = {
    "rtx-a6000", "a100-40g-sxm", "a100-40g-pcie", "a100-80g-sxm", "a100-80g-pcie", "l4", "l40s",
    "rtx-3090", "rtx-4090", "rtx-5090", "rtx-pro-6000", "h100-sxm", "h100-pcie", "h100-nvl",
    "h20", "h20-141g", "h200", "b200", "gb10", "mi300x", "mi355x", "rtx-5070-ti", "rtx-5090-d",
    "t4", "a10",
}  # fmt: skip


def test_catalog_has_required_gpus_with_sane_figures():
    specs = list_gpus()
    keys = [s.key for s in specs]
    assert len(keys) == len(set(keys))
    assert set(keys) >= REQUIRED
    for s in specs:
        assert s.memory_mib > 0 and s.bandwidth_gbs > 0 and s.bf16_tflops > 0, s.key
        assert s.vendor in ("nvidia", "amd")
    assert [s.key for s in specs if s.unified_memory] == ["gb10"]
    assert {s.key for s in specs if s.vendor == "amd"} == {"mi300x", "mi355x"}


@pytest.mark.parametrize("key, mib", sorted(MEMORY_MIB.items()))
def test_memory_is_nvidia_smi_total(key, mib):
    assert get_gpu(key).memory_mib == mib


def test_memory_sources_are_where_they_say():
    """'log:<case>' figures are printed in that log; 'ref:<file>' ones in that reference file."""
    for e in entries():
        src = e.memory_from
        if src.startswith("log:"):
            text = (GT / f"{src[4:]}.txt").read_text(encoding="utf-8")
            assert f"{e.spec.memory_mib}MiB" in text, e.spec.key
        elif src.startswith("ref:"):
            name = src[4:].split()[0]
            text = (DATA / "reference" / name).read_text(encoding="utf-8")
            assert str(e.spec.memory_mib) in text, e.spec.key


@pytest.mark.parametrize(
    "name, key",
    [
        ("A6000", "rtx-a6000"),
        ("RTX A6000", "rtx-a6000"),
        ("rtx-a6000", "rtx-a6000"),
        ("NVIDIA RTX A6000", "rtx-a6000"),
        ("H100", "h100-sxm"),
        ("h100-sxm", "h100-sxm"),
        ("H100 SXM", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("H100 NVL", "h100-nvl"),
        ("4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("rtx_3090", "rtx-3090"),
        ("MI300X", "mi300x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("GB10", "gb10"),
        ("spark", "gb10"),
        ("DGX Spark", "gb10"),
        ("NVIDIA GeForce RTX 5090 D", "rtx-5090-d"),
        ("NVIDIA GeForce RTX 5070 Ti", "rtx-5070-ti"),
        ("5090", "rtx-5090"),
        ("A100", "a100-80g-sxm"),
        ("a100-40g", "a100-40g-sxm"),
        ("NVIDIA A100-SXM4-40GB", "a100-40g-sxm"),
        ("NVIDIA A100-PCIE-40GB", "a100-40g-pcie"),
        ("NVIDIA A100 80GB PCIe", "a100-80g-pcie"),
        ("H20", "h20"),
        ("h20-3e", "h20-141g"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
        ("RTX PRO 6000", "rtx-pro-6000"),
        ("Tesla T4", "t4"),
        ("L40S", "l40s"),
        ("nvidia l4", "l4"),
    ],
)
def test_lookup_accepts_common_spellings(name, key):
    assert get_gpu(name).key == key
    assert get_gpu(name.upper()).key == key


def test_every_nvml_name_maps_back_to_its_entry():
    for e in entries():
        for n in e.nvml_names:
            assert match_nvml_name(n, e.spec.memory_mib).key == e.spec.key, n


def test_shared_nvml_name_is_split_by_memory():
    # Both H20 SKUs report "NVIDIA H20"; the 141 GB one is told apart by NVML's total.
    assert match_nvml_name("NVIDIA H20", 97871).key == "h20"
    assert match_nvml_name("NVIDIA H20", 143771).key == "h20-141g"
    assert match_nvml_name("NVIDIA H20").key == "h20"
    assert match_nvml_name("NVIDIA Quadro Imaginary") is None


def test_unknown_gpu_error_is_one_line_with_close_matches():
    with pytest.raises(HardwareError) as ei:
        get_gpu("H1000")
    msg = str(ei.value)
    assert "\n" not in msg
    assert "'H1000'" in msg and "h100-sxm" in msg
    assert "servefit gpus" in msg and "--gpu-mem-mib" in msg
    assert find_gpu("H1000") is None


def test_unknown_gpu_without_close_match_still_points_to_help():
    with pytest.raises(HardwareError, match="servefit gpus.*--gpu-mem-mib"):
        get_gpu("zzzzzz")


def test_with_memory_override_and_validation():
    g = with_memory_mib(get_gpu("a6000"), 48000)
    assert g.memory_mib == 48000 and g.key == "rtx-a6000"
    assert get_gpu("a6000").memory_mib == 49140  # catalog untouched
    for bad in (0, -1, float("nan"), True, "48000"):
        with pytest.raises(HardwareError):
            with_memory_mib(get_gpu("a6000"), bad)


def test_generic_gpu_for_unlisted_cards():
    g = generic_gpu("NVIDIA GeForce RTX 4080 SUPER", 16376)
    assert g.memory_mib == 16376 and g.key == "local-nvidia-geforce-rtx-4080-super"
    assert g.bandwidth_gbs == 0.0 and g.context_mib > 0
    with pytest.raises(HardwareError):
        generic_gpu("x", 0)


def test_normalize():
    assert normalize("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert normalize("AMD Instinct MI300X") == "mi300x"
    assert normalize("h100-sxm") == normalize("H100 SXM") == "h100sxm"


def test_entry_and_docs_table_agree():
    """docs/gpus.md lists every catalog key with its memory figure."""
    text = (ROOT / "docs" / "gpus.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `([a-z0-9-]+)` \|[^|]*\| (\d+)", text, re.M)
    }
    for s in list_gpus():
        assert rows.get(s.key) == str(s.memory_mib), s.key
        assert entry(s.key).perf_from
    with pytest.raises(HardwareError):
        entry("nope")
    assert not math.isnan(get_gpu("gb10").bf16_tflops)
