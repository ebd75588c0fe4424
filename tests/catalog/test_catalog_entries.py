"""The bundled catalog: index, provenance, lookups, summaries."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from servefit import catalog
from servefit.model.config import read_json
from tests.groundtruth import DATA

# file -> (git blob id, size) of the source each catalog copy was taken from
SOURCE_BLOBS = {
    f: (blob, int(size))
    for blob, size, f in (
        line.split()
        for line in (DATA / "catalog" / "source-blobs.txt").read_text().splitlines()
        if not line.startswith("#")
    )
}


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


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


def test_copies_are_byte_identical_to_their_sources():
    for e in catalog._index():
        if e.id == "Qwen/Qwen3.6-27B":
            continue
        data = e.path.read_bytes()
        assert (git_blob(data), len(data)) == SOURCE_BLOBS[e.file], e.file


def test_source_blobs_are_the_ones_sources_md_names():
    """SOURCES.md names the public repository's git blob (or the byte count) of every real copy;
    the recorded source is that blob."""
    rows = (catalog.DATA / "SOURCES.md").read_text(encoding="utf-8").splitlines()
    named = set()
    for file, (blob, size) in SOURCE_BLOBS.items():
        row = next((r for r in rows if r.startswith(f"| {file} |")), "")
        m = re.search(r"\bblob ([0-9a-f]{8})\b|\((\d+) bytes\)", row)
        if m is None:
            continue
        named.add(file)
        if m[2]:
            assert size == int(m[2]), file
        else:
            assert blob.startswith(m[1]), file
    assert named == {e.file for e in catalog._index() if e.kind == "real"}


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
    from servefit.report.catalogs import summaries

    assert not any(e.kind == "defaults" for e in catalog.entries())  # hidden unless asked for
    entries = {e.id: e for e in summaries()}
    q = entries["Qwen/Qwen3.5-27B"]
    assert q.architecture == "Qwen3_5ForConditionalGeneration"
    assert q.layers == {"gated_deltanet": 48, "mlp": 64, "full_attention": 16}
    assert q.params_b == pytest.approx(27.78, abs=0.01)
    assert "27.8B params" in q.text and not q.error
    assert all(not e.error for e in entries.values())


def test_defaults_listed_on_request():
    from servefit.report.catalogs import summaries

    entries = summaries(kinds=("defaults",))
    assert {e.kind for e in entries} == {"defaults"}
    broken = {e.id for e in entries if e.error}
    assert broken == {"transformers-defaults/lfm2_moe"}  # no layer_types in the defaults
