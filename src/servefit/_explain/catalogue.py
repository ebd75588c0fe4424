"""One lever catalogue per engine: the levers, the engine's flag spellings, the attributes the
shared code needs by role (running-request cap, memory fraction, context, TP, PP), and the
two engine-specific readings of a plan (headroom after the pools, the budget sentence).

explain, fix and fit ask `catalogue_for(plan.engine.name)` and never branch on the engine.
"""

from __future__ import annotations

from functools import cache

from servefit._explain.lever_types import Catalogue, Context
from servefit._plan.planner import PlanRequest
from servefit._plan.schema import Plan
from servefit.errors import ArgumentError
from servefit.model.spec import ModelSpec


@cache
def catalogue_for(engine: str) -> Catalogue:
    from servefit._explain import budget

    if engine == "sglang":
        from servefit._explain.levers import LEVERS, cli_tokens, flag_name
        from servefit.engines.sglang.remedies import REMEDIES

        return Catalogue(
            engine="sglang",
            levers=LEVERS,
            flag=flag_name,
            tokens=cli_tokens,
            running_dest="max_running_requests",
            fraction_dest="mem_fraction_static",
            context_dest="context_length",
            tp_dest="tp_size",
            pp_dest="pp_size",
            headroom=budget.free_after_pools,
            headroom_means="for activations and CUDA graphs",
            min_free_gib=2.0,  # must hold the activations and CUDA graphs, not modelled here
            budget_notes=budget.sglang_notes,
            not_user_levers=frozenset(
                {"model_path", "host", "port", "served_model_name", "trust_remote_code"}
            ),
            remedies=REMEDIES,
        )
    if engine == "vllm":
        from servefit._explain.levers_vllm import LEVERS, cli_tokens, flag_name
        from servefit.engines.vllm.remedies import REMEDIES

        return Catalogue(
            engine="vllm",
            levers=LEVERS,
            flag=flag_name,
            tokens=cli_tokens,
            running_dest="max_num_seqs",
            fraction_dest="gpu_memory_utilization",
            context_dest="max_model_len",
            tp_dest="tensor_parallel_size",
            pp_dest="pipeline_parallel_size",
            headroom=budget.vllm_headroom,
            headroom_means="beyond vLLM's budget, which already holds the activation peak and "
            "the CUDA graphs",
            # only slack for allocator fragmentation and drift: vLLM measures its activation
            # peak and CUDA graphs inside the budget. vLLM's own default (0.92) leaves 1.4 to
            # 10.6 GiB beyond it, L4 to H200 (servefit's model of the memory at start-up)
            min_free_gib=1.0,
            budget_notes=budget.vllm_notes,
            not_user_levers=frozenset(
                {"model", "model_tag", "host", "port", "served_model_name", "trust_remote_code"}
            ),
            remedies=REMEDIES,
        )
    raise ArgumentError(f"servefit has no lever catalogue for {engine!r} (sglang, vllm)")


def context_for(request: PlanRequest, plan: Plan, model: ModelSpec) -> Context:
    """The lever context of `plan` (of `request`, whose model is `model`)."""
    return Context(
        request=request,
        plan=plan,
        model=model,
        profile=plan.engine.profile,
        catalogue=catalogue_for(plan.engine.name),
    )
