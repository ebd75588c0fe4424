"""tools/engine_releases.py on tiny release trees written here: what counts as a change, a move,
a group, a judgement, and a disagreement with a reference page. Nothing is downloaded."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load():
    path = REPO / "tools" / "engine_releases.py"
    spec = importlib.util.spec_from_file_location("engine_releases", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


er = _load()

# Release 1.0 of a fake engine "eng".
SIZING_1_0 = '''
"""Sizing."""

DEFAULT_RATIO = 0.9

ARCHS = {"Hybrid": ("hybrid", "HybridModel"), "Dense": ("dense", "DenseModel")}


def budget(total, reserve):
    """Bytes left for the pools."""
    return total - reserve


class Pool:
    size_per_req: int = 4

    def slots(self, reqs):
        return (reqs + 1) * self.size_per_req


class Args:
    def _handle_memory(self, gpu):
        if gpu < 35:
            self.fraction = 0.8
        return self.fraction
'''

# 1.1: only docstrings, comments, annotations and layout differ.
SIZING_1_1 = '''
"""Sizing, reworded."""

DEFAULT_RATIO = 0.9

ARCHS = {
    "Hybrid": ("hybrid", "HybridModel"),
    "Dense": ("dense", "DenseModel"),
}


def budget(total: int, reserve: int) -> int:
    # What is left once the reserve is taken.
    return (total
            - reserve)


class Pool:
    """The pool."""

    size_per_req: int = 4

    def slots(self, reqs: int) -> int:
        """Slots for `reqs` requests, padding slot included."""
        "a bare string is no code either"
        return (reqs + 1) * self.size_per_req  # padding slot


class Args:
    def _handle_memory(self, gpu):
        if gpu < 35:  # small GPUs
            self.fraction = 0.8
        return self.fraction
'''

# 1.2: budget's body changes; Pool moves to pool.py unchanged; Args._handle_memory becomes a
# hook function of its receiver (identical code); ARCHS gains an entry and "Dense" changes.
SIZING_1_2 = """
DEFAULT_RATIO = 0.9

ARCHS = {"Hybrid": ("hybrid", "HybridModel"), "Dense": ("dense2", "DenseModel"), "New": ("n", "N")}


def budget(total, reserve):
    return total - 2 * reserve
"""
POOL_1_2 = """
class Pool:
    size_per_req: int = 4

    def slots(self, reqs):
        return (reqs + 1) * self.size_per_req
"""
HOOK_1_2 = """
def handle_memory(server_args, gpu):
    if gpu < 35:
        server_args.fraction = 0.8
    return server_args.fraction
"""
LOGS = """
def banner(version):
    return f"engine {version}"
"""
LOGS_1_3 = """
def banner(version):
    return f"engine v{version}"
"""

RELEASE_FILES = {
    "1.0": {"eng/srt/sizing.py": SIZING_1_0, "eng/srt/logs.py": LOGS},
    "1.1": {"eng/srt/sizing.py": SIZING_1_1, "eng/srt/logs.py": LOGS},
    "1.2": {
        "eng/srt/sizing.py": SIZING_1_2,
        "eng/srt/mem/pool.py": POOL_1_2,
        "eng/srt/hooks/memory_hook.py": HOOK_1_2,
        "eng/srt/logs.py": LOGS,
    },
    "1.3": {
        "eng/srt/sizing.py": SIZING_1_2,
        "eng/srt/mem/pool.py": POOL_1_2,
        "eng/srt/hooks/memory_hook.py": HOOK_1_2,
        "eng/srt/logs.py": LOGS_1_3,
    },
}
VERSIONS = tuple(RELEASE_FILES)

# The functions a fake servefit mirrors: a plan citation (engines/), a short-form citation
# resolved against the trees, a runtime citation (doctor/), and a citation of nothing.
SERVEFIT_FILES = {
    "engines/eng/pools.py": "# eng/srt/sizing.py:budget and sizing.py:Pool.slots\n",
    "engines/eng/tables.py": "# eng/srt/sizing.py:DEFAULT_RATIO, eng/srt/sizing.py:ARCHS\n",
    "doctor/eng.py": "# the start banner (eng/srt/logs.py:banner)\n",
    "model/layers.py": "# eng/srt/sizing.py:no_such_function\n",
}
LINEAGE = (
    er.Lineage(
        "eng",
        ("eng/srt/hooks/memory_hook.py:handle_memory", "eng/srt/sizing.py:Args._handle_memory"),
        "ref 1.1",
        ("1.1",),
    ),
    er.Lineage("eng", ("eng/srt/sizing.py:ARCHS[Hybrid]",), "ref arch"),
    er.Lineage("eng", ("eng/srt/sizing.py:ARCHS[New]",), "ref arch", ("1.2",)),
    er.Lineage("eng", ("eng/srt/sizing.py:ARCHS[Dense]",), "ref " + er.STABLE),
)


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    for version, files in RELEASE_FILES.items():
        write_tree(tmp_path / "cache" / "eng" / version, files)
    return tmp_path / "cache"


@pytest.fixture()
def cited(tmp_path: Path) -> list:
    src = tmp_path / "repo" / "src" / "servefit"
    write_tree(src, SERVEFIT_FILES)
    return er.citations(src, engines=("eng",))


def report(cache: Path, cited: list, judgements=(), reference_groups=None):
    trees = list(er.release_trees("eng", VERSIONS, cache, offline=True))
    return er.analyse("eng", trees, cited, LINEAGE, judgements, reference_groups)


def changes_at(rep, version: str) -> dict[str, str]:
    r = rep.observed.versions.index(version)
    return {c.function: c.kind for c in rep.found[r]}


def test_comment_docstring_annotation_and_layout_changes_are_not_changes(cache, cited):
    rep = report(cache, cited)
    assert changes_at(rep, "1.1") == {}


def test_a_body_change_is_a_change_and_a_move_is_a_move(cache, cited):
    found = changes_at(report(cache, cited), "1.2")
    assert found["eng/srt/sizing.py:budget"] == er.CHANGED
    # Pool.slots left sizing.py for mem/pool.py with the same code: found by searching the tree.
    assert found["eng/srt/mem/pool.py:Pool.slots"] == er.MOVED
    # A method turned into a function of its receiver (self -> server_args) is a move too.
    assert found["eng/srt/hooks/memory_hook.py:handle_memory"] == er.MOVED
    assert "eng/srt/sizing.py:DEFAULT_RATIO" not in found


def test_dict_entries_are_followed_one_by_one(cache, cited):
    found = changes_at(report(cache, cited), "1.2")
    assert found["eng/srt/sizing.py:ARCHS[New]"] == er.ADDED
    assert found["eng/srt/sizing.py:ARCHS[Dense]"] == er.CHANGED
    assert "eng/srt/sizing.py:ARCHS[Hybrid]" not in found
    assert found["eng/srt/sizing.py:ARCHS"] == er.CHANGED  # the cited whole dict


def test_grouping_follows_plan_changes_only(cache, cited):
    rep = report(cache, cited)
    assert [g.releases for g in rep.groups] == [["1.0", "1.1"], ["1.2", "1.3"]]
    # 1.3 changes a runtime function (the banner servefit's doctor reads): no new profile.
    assert changes_at(rep, "1.3") == {"eng/srt/logs.py:banner": er.CHANGED}
    assert [v.joined_by for v in rep.verdicts] == ["first", "no change", "new group", "no change"]
    assert {c.function for c in rep.groups[1].changes} == {
        "eng/srt/sizing.py:budget",
        "eng/srt/sizing.py:ARCHS",
        "eng/srt/sizing.py:ARCHS[New]",
        "eng/srt/sizing.py:ARCHS[Dense]",
    }


def test_a_judgement_joins_a_release_only_when_it_covers_every_plan_change(cache, cited):
    partial = er.Equivalent("eng", "1.1", "1.2", "the reserve is zero on every audited path",
                            ("budget",))  # fmt: skip
    rep = report(cache, cited, [partial])
    assert [g.releases for g in rep.groups] == [["1.0", "1.1"], ["1.2", "1.3"]]
    assert rep.verdicts[2].judged == {"eng/srt/sizing.py:budget": partial.reason}
    full = er.Equivalent("eng", "1.1", "1.2", "no audited model uses these entries", ("ARCHS",))
    rep = report(cache, cited, [partial, full])
    assert [g.releases for g in rep.groups] == [["1.0", "1.1", "1.2", "1.3"]]
    assert rep.verdicts[2].joined_by == "judged alike"
    with pytest.raises(ValueError, match="not consecutive"):
        report(cache, cited, [er.Equivalent("eng", "1.0", "1.2", "x", ("*",))])


def test_reference_disagreements(cache, cited):
    rep = report(cache, cited, reference_groups=[["1.0", "1.1", "1.2"], ["1.3"]])
    text = "\n".join(rep.disagreements)
    # A change the page names where the code did not change (handle_memory only moved in 1.2).
    assert "1.1: the reference (ref 1.1) names a change in " in text
    assert "eng/srt/hooks/memory_hook.py:handle_memory" in text
    # A change the page names, found: no line for it.
    assert "ARCHS[New]" not in text
    # "unchanged in the range", changed in 1.2.
    assert "`eng/srt/sizing.py:ARCHS[Dense]`: the reference says unchanged in the range; " \
           "changed in 1.2" in text  # fmt: skip
    assert (
        "the reference groups {1.0, 1.1, 1.2}; the evidence gives {1.0, 1.1} · {1.2, 1.3}" in text
    )


def test_citations_roles_and_unresolved(cache, cited):
    rep = report(cache, cited)
    roles = {item.key: item.role for item in rep.observed.items}
    assert roles["eng/srt/sizing.py:budget"] == er.PLAN
    assert roles["eng/srt/logs.py:banner"] == er.RUNTIME
    # `sizing.py:Pool.slots` (short form) is the same function as the search found.
    assert roles["eng/srt/mem/pool.py:Pool.slots"] == er.PLAN
    assert [c.text for c in rep.observed.unresolved] == ["eng/srt/sizing.py:no_such_function"]


def test_markdown_and_json(cache, cited):
    rep = report(cache, cited)
    text = er.render_markdown([rep])
    assert "| 1.2 | 1.2 | **new profile**: 4 plan functions changed |" in text
    assert "| 1.3 | 1.2 | no plan function changed (1 moves / runtime) |" in text
    assert "`eng/srt/sizing.py:budget` changed" in text
    assert "`eng/srt/mem/pool.py:Pool.slots` moved (was `eng/srt/sizing.py:Pool.slots`)" in text
    data = json.loads(json.dumps(er.to_json([rep])))["eng"]
    assert [g["releases"] for g in data["groups"]] == [["1.0", "1.1"], ["1.2", "1.3"]]
    budget = next(f for f in data["functions"] if f["function"] == "eng/srt/sizing.py:budget")
    assert budget["found"]["1.0"]["digest"] == budget["found"]["1.1"]["digest"]
    assert budget["found"]["1.1"]["digest"] != budget["found"]["1.2"]["digest"]


def test_offline_miss_is_one_clear_error(tmp_path, capsys):
    rc = er.main(["--cache", str(tmp_path), "--offline", "--engine", "sglang"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == f"engine_releases: error: sglang 0.5.9 is not in {tmp_path} " \
                  "(run without --offline to fetch it)"  # fmt: skip


def test_fetch_extracts_only_the_python_sources(tmp_path, monkeypatch):
    def fake_pip(cmd, check):
        assert cmd[1:4] == ["-m", "pip", "download"] and cmd[-1] == "vllm==0.33.0"
        wheel = Path(cmd[cmd.index("-d") + 1]) / "vllm-0.33.0-cp38-abi3-manylinux1_x86_64.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("vllm/config/cache.py", "X = 1\n")
            zf.writestr("vllm/_C.abi3.so", b"\0" * 16)
            zf.writestr("vllm-0.33.0.dist-info/METADATA", "Name: vllm\n")
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(er.subprocess, "run", fake_pip)
    root = er.fetch("vllm", "0.33.0", tmp_path, offline=False)
    assert root == tmp_path / "vllm" / "0.33.0"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["vllm/config/cache.py"]
    # Present now: no second download.
    monkeypatch.setattr(er.subprocess, "run", None)
    assert er.fetch("vllm", "0.33.0", tmp_path, offline=True) == root


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv(er.CACHE_ENV, raising=False)
    assert er.cache_dir(None) == Path("~/.cache/servefit/wheels").expanduser()
    monkeypatch.setenv(er.CACHE_ENV, str(tmp_path))
    assert er.cache_dir(None) == tmp_path
    assert er.cache_dir("/elsewhere") == Path("/elsewhere")


def test_the_committed_tables_are_well_formed():
    for engine, versions in er.RELEASES.items():
        assert len(set(versions)) == len(versions)
        groups = er.REFERENCE_GROUPS.get(engine)
        if groups is not None:
            assert [v for g in groups for v in g] == list(versions)
    for j in er.EQUIVALENT:
        versions = er.RELEASES[j.engine]
        assert versions.index(j.later) == versions.index(j.earlier) + 1, j
        assert j.reason and j.covers
    for entry in er.LINEAGE:
        assert entry.engine in er.ENGINES
        assert all(site.startswith(entry.engine + "/") for site in entry.sites)
        assert set(entry.claimed) <= set(er.RELEASES[entry.engine])


def test_a_table_of_architectures_is_followed_for_the_audited_ones(cache, cited):
    trees = list(er.release_trees("eng", VERSIONS, cache, offline=True))
    files = frozenset().union(*(t.files for t in trees))
    items, _ = er.catalogue(
        "eng", files, cited, (), narrowed=("eng/srt/sizing.py:ARCHS",),
        architectures=("Dense", "Gone"),
    )  # fmt: skip
    observed = er.observe("eng", VERSIONS, trees, items, [])
    keys = sorted(item.key for item in observed.items)
    # The cited whole table stands for its audited entries; "Gone" is in no release: dropped.
    assert "eng/srt/sizing.py:ARCHS" not in keys
    assert "eng/srt/sizing.py:ARCHS[Dense]" in keys
    assert not any("Gone" in key for key in keys)
    assert [c.text for c in observed.unresolved] == ["eng/srt/sizing.py:no_such_function"]
    found = er.changes(observed)
    assert {c.function: c.kind for c in found[2]}["eng/srt/sizing.py:ARCHS[Dense]"] == er.CHANGED


def test_registry_check_names_unregistered_releases_and_mixed_profiles(cache, cited):
    rep = report(cache, cited)  # groups {1.0, 1.1} {1.2, 1.3}
    assert er.registry_check(rep, {"1.0": "1.0", "1.1": "1.0", "1.2": "1.2", "1.3": "1.2"}) == []
    assert er.registry_check(rep, {"1.0": "1.0", "1.1": "1.2", "1.2": "1.2"}) == [
        "not registered: 1.3",
        "group {1.0, 1.1} is spread over profiles ['1.0', '1.2']",
        "profile 1.2 serves releases of groups ['1.0', '1.2'] whose code differs",
    ]
