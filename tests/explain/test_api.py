"""servefit.plan / .explain / .fit: typed results, repeatable calls, the documented examples."""

from __future__ import annotations

import doctest

import servefit
from servefit.explain.schema import Explanation
from servefit.fit.schema import FitResult
from servefit.plan.schema import Plan
from tests.seedcase import SEED, SEED_FIT


def test_plan_twice_and_subpackages_still_reachable():
    # importing servefit.plan.planner must not replace the servefit.plan function
    import servefit.plan.planner as planner

    a = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", **SEED)
    b = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", **SEED)
    assert isinstance(a, Plan) and a == b
    assert servefit.plan.planner is planner
    assert servefit.fit.search.FitRequest is not None


def test_explain_and_fit_return_typed_frozen_results():
    e = servefit.explain(
        "Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9", mem_fraction_static=0.85, **SEED
    )
    assert isinstance(e, Explanation) and e.fix.best.command_flags == "--max-running-requests 11"
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
