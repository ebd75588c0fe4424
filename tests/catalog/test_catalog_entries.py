"""The bundled catalog: index, provenance, lookups, summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit import catalog
from servefit.model.config import read_json

SHARED = Path(__file__).resolve().parents[3] / "shared" / "model-configs"


def test_index_lists_every_data_file_once():
    rows = json.loads((catalog.DATA / "index.json").read_text())
    files = sorted(p.name for p in catalog.DATA.glob("*.json") if p.name != "index.json")
    assert sorted(r["file"] for r in rows) == files
    assert len({r["id"].lower() for r in rows}) == len(rows)
    for r in rows:
        assert r["kind"] in catalog.KINDS and r["provenance"], r


def test_kinds():
    kinds = {e.id: e.kind for e in catalog._index()}
    assert kinds["Qwen/Qwen3.5-27B"] == "real"
    assert kinds["mistralai/Mistral-7B-Instruct-v0.3"] == "derived"
    assert kinds["Qwen/Qwen3.6-27B"] == "derived"
    assert kinds["transformers-defaults/qwen3_next"] == "defaults"
    assert (catalog.DATA / "SOURCES.md").is_file()


def test_qwen36_27b_is_the_nvfp4_architecture_without_quantization():
    derived = read_json(catalog.find("Qwen/Qwen3.6-27B"))
    nvfp4 = read_json(catalog.find("nvidia/Qwen3.6-27B-NVFP4"))
    nvfp4.pop("quantization_config")
    assert derived == nvfp4
    entry = catalog.find_entry("qwen/qwen3.6-27b")
    assert "quantization_config removed" in entry.provenance


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/model-configs not beside the checkout")
def test_copies_are_byte_identical_to_shared():
    for e in catalog._index():
        if e.kind == "defaults":
            src = SHARED / "transformers-defaults" / e.file
        elif e.id == "Qwen/Qwen3.6-27B":
            continue
        else:
            src = SHARED / e.file
        assert e.path.read_bytes() == src.read_bytes(), e.file


@pytest.mark.parametrize(
    "ref",
    [
        "Qwen/Qwen3.5-27B",
        "QWEN/QWEN3.5-27B",
        "Qwen__Qwen3.5-27B",
        "Qwen__Qwen3.5-27B.json",
        "catalog:qwen/qwen3.5-27b",
    ],
)
def test_find_forms(ref):
    assert catalog.find(ref) == catalog.DATA / "Qwen__Qwen3.5-27B.json"


def test_find_unknown():
    assert catalog.find("nobody/nothing") is None


def test_list_entries_summaries():
    entries = {e.id: e for e in catalog.list_entries()}
    assert not any(e.kind == "defaults" for e in entries.values())  # hidden unless asked for
    q = entries["Qwen/Qwen3.5-27B"]
    assert q.architecture == "Qwen3_5ForConditionalGeneration"
    assert q.layers == {"gated_deltanet": 48, "mlp": 64, "full_attention": 16}
    assert q.params_b == pytest.approx(27.78, abs=0.01)
    assert "27.8B params" in q.summary and not q.error
    assert all(not e.error for e in entries.values())


def test_defaults_listed_on_request():
    entries = catalog.list_entries(kinds=("defaults",))
    assert {e.kind for e in entries} == {"defaults"}
    broken = {e.id for e in entries if e.error}
    assert broken == {"transformers-defaults/lfm2_moe"}  # no layer_types in the defaults
