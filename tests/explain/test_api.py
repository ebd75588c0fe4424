"""servefit.plan / .explain / .fit: typed results, repeatable calls, the documented examples."""

from __future__ import annotations

import doctest

import pytest

import servefit
from servefit._explain.schema import Explanation
from servefit._fit.schema import FitResult
from servefit._plan.schema import Plan
from tests.seedcase import SEED, SEED_FIT


def test_plan_twice_and_the_api_names_stay_functions():
    # importing the packages behind the API never rebinds servefit.plan / .explain / .fit
    import servefit._explain.analysis
    import servefit._fit.search
    import servefit._plan.planner as planner
    from servefit import api

    assert (servefit.plan, servefit.explain, servefit.fit) == (api.plan, api.explain, api.fit)
    a = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", **SEED)
    b = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", **SEED)
    assert isinstance(a, Plan) and a == b
    assert servefit._plan.planner is planner
    # the result types are exported as they are
    assert (servefit.Plan, servefit.PlanRequest) == (Plan, planner.PlanRequest)
    assert (servefit.Explanation, servefit.FitResult) == (Explanation, FitResult)


def test_the_package_is_typed_and_imports_light():
    import subprocess
    import sys
    from pathlib import Path

    assert (Path(servefit.__file__).parent / "py.typed").is_file()
    # `import servefit` (and so the CLI's start) loads no planner, pydantic or rich
    code = (
        "import sys, servefit; "
        "print(sorted(m for m in sys.modules if m.startswith(('servefit.', 'pydantic', 'rich'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['servefit.api']"


SEED_LAUNCH = [
    "--",
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "Qwen/Qwen3.6-27B",
    "--tp-size",
    "2",
    "--context-length",
    "32768",
    "--mem-fraction-static",
    "0.88",
]
SEED_ENGINE = ["--gpu", "A6000", "--engine", "sglang==0.5.9"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["plan", *SEED_ENGINE, *SEED_LAUNCH],
        ["plan", *SEED_ENGINE, "--format", "json", *SEED_LAUNCH],
        ["explain", *SEED_ENGINE, "--format", "json", *SEED_LAUNCH],
        ["fit", *SEED_ENGINE, "--format", "json", *SEED_LAUNCH],
    ],
    ids=["help", "plan", "plan-json", "explain-json", "fit-json"],
)
def test_the_cli_runs_without_pydantic(argv):
    """The result records are dataclasses (servefit/records.py): pydantic costs ~130 ms to import
    and build, and only the launch / doctor / verify commands and the JSON schemas need it."""
    loaded = _modules_after(argv)
    assert sorted(m for m in loaded if m.split(".")[0] in ("pydantic", "pydantic_core")) == []


def _modules_after(argv: list[str]) -> set[str]:
    """The modules a fresh Python holds after `servefit ARGV` ran (exit 0 or 1)."""
    import json
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from servefit.cli.main import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, 1, None), exc.code\n"
        "loaded = sorted(sys.modules)\n"
        "import json\n"
        "print(json.dumps(loaded))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_explain_and_fit_return_typed_frozen_results():
    e = servefit.explain(
        "Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", mem_fraction_static=0.85, **SEED
    )
    assert isinstance(e, Explanation) and e.fix.best.command_flags == "--max-running-requests 12"
    assert Explanation.model_validate_json(e.model_dump_json()) == e
    r = servefit.fit(
        "Qwen/Qwen3.6-27B",
        **SEED_FIT,
        concurrency=16,
        top=1,
        baseline="--tp-size 2 --max-running-requests 16 --mem-fraction-static 0.88",
    )
    assert isinstance(r, FitResult) and len(r.best) == 1 and r.baseline is not None
    assert FitResult.model_validate_json(r.model_dump_json()) == r


def test_api_docstring_examples_run():
    import servefit.api

    result = doctest.testmod(servefit.api, verbose=False)
    assert result.attempted >= 6 and result.failed == 0


# Modules `servefit plan` of a named GPU never needs, each with what it cost the CLI's start on
# 2 cores (python -X importtime, bytecode present): the plan imports them only on the path that
# uses them (engines/registry.py:installed_version, redact.py:fingerprint, model/config.py:
# hub_reachable, didyoumean.py:closest, report/commands.py, engines/devices.py).
NOT_ON_PLAN_PATH = {
    "importlib.metadata": "35 ms with email, zipfile and csv: only a release left unnamed",
    "importlib.resources": "14 ms with tempfile and shutil: tables are files beside modules",
    "hashlib": "4 ms of OpenSSL: only a secret to fingerprint",
    "socket": "4 ms: only a download probes the Hub",
    "difflib": "1.3 ms: only a misspelling",
    "servefit._fit.schema": "5 fit records: only a command printed",
    "servefit.hardware.nvml": "NVML's records: only --gpu local",
    "pydantic": "~130 ms: only the JSON schemas",
}


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", *SEED_ENGINE, *SEED_LAUNCH],
        ["plan", *SEED_ENGINE, "--format", "json", *SEED_LAUNCH],
    ],
    ids=["plan", "plan-json"],
)
def test_plan_imports_nothing_it_does_not_use(argv):
    assert sorted(set(NOT_ON_PLAN_PATH) & _modules_after(argv)) == []
