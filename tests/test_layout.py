"""The suite is self-contained: a copy of the committed tree, with nothing beside it, collects and
runs its data-reading tests; no test refers to a folder next to the checkout; test folders mirror
the package (tests/<package>/test_*.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "src" / "servefit"

# The modules that read tests/data/ (and the bundled catalog) when their tests run: the copy
# collects the whole suite and runs these; none of them may skip.
DATA_READERS = [
    "test_catalog_entries.py",
    "test_ground_truth_logs.py",
    "test_replay.py",
    "test_gpu_catalog.py",
    "test_preload.py",
    "test_events.py",
    "test_real_cpu_logs.py",
    "test_golden.py",
    "test_cpu.py",
]
# A path outside the repository: the sibling folder `shared`, by any spelling a test could use.
OUTSIDE = re.compile(r"\.\./shared|/work/shared|[\"']shared[\"']|(?<![\w.-])shared/")
# Sample texts for the loop detector (frozen copies of documents), not paths a test reads.
SAMPLE_TEXTS = TESTS / "verify" / "corpus"


def committed_copy(dest: Path) -> Path:
    """The files git tracks, as they are in the working tree, copied under dest/servefit."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    repo = dest / "servefit"
    for name in filter(None, files):
        src = ROOT / os.fsdecode(name)
        if src.is_file():  # a tracked file deleted in the working tree is not copied
            (repo / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / os.fsdecode(name))
    return repo


def pytest_in(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(repo / "src")  # the copy's package, not the installed checkout's
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_copy_with_nothing_beside_it_collects_and_runs_its_data_tests(tmp_path):
    repo = committed_copy(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["servefit"]
    # -k matches the module nodes' names: the whole suite is collected, the data readers run
    ran = pytest_in(repo, "-k", " or ".join(DATA_READERS))
    out = ran.stdout[-4000:] + ran.stderr[-2000:]
    assert ran.returncode == 0, out
    summary = ran.stdout.strip().splitlines()[-1]
    assert re.match(r"=* ?\d+ passed, \d+ deselected in ", summary), out


def test_no_test_refers_to_a_folder_beside_the_checkout():
    hits = []
    for path in sorted(TESTS.rglob("*")):
        if path == Path(__file__) or SAMPLE_TEXTS in path.parents or "__pycache__" in path.parts:
            continue
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == []


# Suites that test the whole tool rather than one package: tests/engine/ runs servefit against
# real engines (pytest -m engine); tests/tools/ tests the repository's tools/ scripts;
# tests/reliability/ throws the bad-input corpus at every command.
WHOLE_TOOL = {Path("engine"), Path("tools"), Path("reliability")}


def test_test_folders_mirror_the_package():
    for module in TESTS.rglob("test_*.py"):
        folder = module.parent.relative_to(TESTS)
        if folder in WHOLE_TOOL:
            continue
        # tests/plan/ mirrors the private package servefit/_plan/ (the API's plan() owns the name)
        private = Path(*("_" + folder.parts[0], *folder.parts[1:])) if folder.parts else folder
        assert (PACKAGE / folder).is_dir() or (PACKAGE / private).is_dir(), (
            f"{module.relative_to(ROOT)}: no servefit/{folder}"
        )
