"""fit's layout order and fraction margin (_fit/rank.py): TP inside a node and pipeline stages
only across nodes come before memory; the memory fraction stays FRACTION_MARGIN below the
highest that starts with the same other flags."""

from __future__ import annotations

import pytest

from servefit._explain.outcome import outcome
from servefit._fit.rank import FRACTION_MARGIN, layout_suits_nodes
from servefit._fit.search import FitRequest, fit
from servefit._plan.planner import PlanRequest, plan
from tests.seedcase import SEED, SEED_FIT


def test_layout_order_is_tp_in_a_node_then_one_stage_per_node():
    req = FitRequest(model="m", gpu="H100", num_gpus=8, nodes=2, context=1024)
    order = sorted([(16, 1), (8, 2), (4, 4), (2, 8), (1, 16)],
                   key=lambda tp_pp: layout_suits_nodes(req, *tp_pp), reverse=True)  # fmt: skip
    # TP 16 spans both nodes: last; of the rest, the fewest stages sharing a node first
    assert order == [(8, 2), (4, 4), (2, 8), (1, 16), (16, 1)]


def test_two_nodes_of_four_keep_tp_on_a_node():
    """Llama-3.1-70B on 2 nodes x 4 A100-80GB at 32K: every candidate ranked first is TP 4 x
    PP 2 (one stage per node); TP 8 would all-reduce every layer across the nodes."""
    r = fit(FitRequest(model="meta-llama/Meta-Llama-3.1-70B", gpu="A100 80GB SXM4", num_gpus=4,
                       nodes=2, context=32768, engine="sglang==0.5.23", top=3))  # fmt: skip
    assert (r.best[0].tp_size, r.best[0].pp_size) == (4, 2)
    assert all(c.tp_size <= 4 for c in r.best)
    assert [cmd.node_rank for cmd in r.best[0].commands] == [0, 1]
    assert r.ranking.startswith("ranked: meets --concurrency; TP inside a node")


def test_the_seed_keeps_a_margin_below_the_highest_fraction_that_starts():
    """The seed at --max-running-requests 16: 0.92 is the highest fraction with 2 GiB of
    headroom (2.21; 0.925 leaves 1.96). fit's best stays at or below 0.92 - 0.01."""

    def at(f: float):
        args = {**SEED, "max_running_requests": 16, "mem_fraction_static": f}
        return outcome(plan(PlanRequest(model="Qwen/Qwen3.6-27B", gpu="A6000",
                                        engine="sglang==0.5.9", args=args)))  # fmt: skip

    assert at(0.92).free_gib >= 2.0 > at(0.925).free_gib
    r = fit(FitRequest(model="Qwen/Qwen3.6-27B", concurrency=16, **SEED_FIT))
    best = r.best[0]
    assert best.args["max_running_requests"] == 16
    assert best.args["mem_fraction_static"] <= 0.92 - FRACTION_MARGIN + 1e-9
    assert best.args["mem_fraction_static"] == pytest.approx(0.9)


def test_qwen35_397b_on_two_nodes_of_eight_h100_keeps_tp_on_each_node():
    """The case that ranked by memory alone: Qwen3.5-397B-A17B on 2 nodes x 8 H100 at 128K
    used to pick TP 2 x PP 8 at --mem-fraction-static 0.955 (eight pipeline stages, four per
    node). Now TP 8 inside each node and one pipeline stage per node, below the edge."""
    r = fit(FitRequest(model="Qwen/Qwen3.5-397B-A17B", gpu="H100", num_gpus=8, nodes=2,
                       context=131072, engine="sglang==0.5.23", top=1))  # fmt: skip
    best = r.best[0]
    assert (best.tp_size, best.pp_size) == (8, 2)
    assert best.args["mem_fraction_static"] <= 0.955 - FRACTION_MARGIN + 1e-9
    assert len(best.commands) == 2  # one launch command per node
