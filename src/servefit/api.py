"""The Python API: plan(), explain(), fit(). Re-exported as servefit.plan / .explain / .fit.

Engine args use the engine's own attribute names (tp_size=2, mem_fraction_static=0.85).

    >>> import servefit
    >>> seed = dict(tp_size=2, context_length=32768, speculative_algorithm="NEXTN",
    ...             speculative_num_steps=3, speculative_eagle_topk=1,
    ...             speculative_num_draft_tokens=4)
    >>> p = servefit.plan("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9",
    ...                   mem_fraction_static=0.85, **seed)
    >>> p.verdict, p.error_consumer
    ('fail', 'speculative mamba state')
    >>> e = servefit.explain("Qwen/Qwen3.6-27B", gpu="A6000", engine="sglang==0.5.9",
    ...                      mem_fraction_static=0.85, **seed)
    >>> e.fix.best.command_flags, e.fix.minimal.command_flags
    ('--max-running-requests 12', '--mem-fraction-static 0.93')
    >>> r = servefit.fit("Qwen/Qwen3.6-27B", gpu="A6000", num_gpus=2, context=32768,
    ...                  concurrency=16, spec="mtp", engine="sglang==0.5.9")
    >>> r.best[0].changed_flags
    ['--max-running-requests 16', '--mem-fraction-static 0.9']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servefit._explain.schema import Explanation
    from servefit._fit.schema import FitResult
    from servefit._plan.planner import PlanRequest
    from servefit._plan.schema import Plan


def _request(
    model: Any,
    gpu: Any,
    engine: str,
    num_gpus: int | None,
    env: dict[str, str] | None,
    gpu_mem_mib: int | None,
    free_gib: float | None,
    measured_free_before_gib: float | None,
    measured_weights_gib: float | None,
    engine_args: dict[str, Any],
) -> PlanRequest:
    from servefit._plan.planner import PlanRequest
    from servefit.errors import ArgumentError

    if isinstance(model, PlanRequest):
        return model
    if gpu is None:
        raise ArgumentError("gpu= is required (a name from `servefit gpus`, or 'local')")
    return PlanRequest(
        model=model,
        gpu=gpu,
        engine=engine,
        args=dict(engine_args),
        env=dict(env or {}),
        num_gpus=num_gpus,
        gpu_mem_mib=gpu_mem_mib,
        free_gib=free_gib,
        measured_free_before_gib=measured_free_before_gib,
        measured_weights_gib=measured_weights_gib,
    )


def plan(
    model: Any,
    *,
    gpu: Any = None,
    engine: str = "sglang",
    num_gpus: int | None = None,
    env: dict[str, str] | None = None,
    gpu_mem_mib: int | None = None,
    free_gib: float | None = None,
    measured_free_before_gib: float | None = None,
    measured_weights_gib: float | None = None,
    **engine_args: Any,
) -> Plan:
    """Predict what the engine allocates at start-up and whether it starts.

    `model` is a catalog id, a config.json / checkpoint path, a Hub id, a ModelSpec, or a
    ready PlanRequest (then the other arguments are ignored).
    """
    from servefit._plan.planner import plan as _plan

    return _plan(
        _request(
            model,
            gpu,
            engine,
            num_gpus,
            env,
            gpu_mem_mib,
            free_gib,
            measured_free_before_gib,
            measured_weights_gib,
            engine_args,
        )
    )


def explain(
    model: Any,
    *,
    gpu: Any = None,
    engine: str = "sglang",
    num_gpus: int | None = None,
    env: dict[str, str] | None = None,
    gpu_mem_mib: int | None = None,
    free_gib: float | None = None,
    measured_free_before_gib: float | None = None,
    measured_weights_gib: float | None = None,
    min_free_gib: float | None = None,
    fix: bool = True,
    allow_lossy: bool = False,
    **engine_args: Any,
) -> Explanation:
    """Plan, then explain it: consumers ranked with their formulas, every lever re-planned
    (incl. "no effect" and why), whether each of the user's flags mattered, and for a failing
    launch the minimal fix (fewest flags; least loss of concurrency, then context) that starts
    with `min_free_gib` of headroom (default: the engine's, 2 GiB SGLang / 1 GiB vLLM).
    `allow_lossy` lets the fix change KV / SSM dtypes."""
    from servefit._explain.analysis import explain_request

    request = _request(
        model,
        gpu,
        engine,
        num_gpus,
        env,
        gpu_mem_mib,
        free_gib,
        measured_free_before_gib,
        measured_weights_gib,
        engine_args,
    )
    return explain_request(
        request, min_free_gib=min_free_gib, with_fix=fix, allow_lossy=allow_lossy
    )


def fit(
    model: Any,
    *,
    gpu: Any,
    num_gpus: int,
    context: int,
    nodes: int = 1,
    concurrency: int | None = None,
    spec: str = "none",
    spec_steps: int | None = None,
    draft_model: str | None = None,
    engine: str = "sglang",
    allow_lossy: bool = False,
    allow_no_radix: bool = False,
    min_free_gib: float | None = None,
    top: int = 3,
    env: dict[str, str] | None = None,
    gpu_mem_mib: int | None = None,
    free_gib: float | None = None,
    baseline: dict[str, Any] | str | None = None,
    dist_init_addr: str = "NODE0_IP:50000",
    model_path: str | None = None,
) -> FitResult:
    """Search TP/PP over `num_gpus` GPUs per node (x `nodes`) and the memory flags for launches
    that start, best effective concurrency at `context` first, with ready-to-run commands.

    `baseline` (engine args as a dict, or a launch command / engine flags as a string) is
    planned too and returned beside the best, e.g. a hand-tuned launch. `engine` may be SGLang
    or vLLM (each searched with its own flags); `min_free_gib` defaults to the engine's
    (2 GiB SGLang, 1 GiB vLLM)."""
    from servefit._fit.search import FitRequest
    from servefit._fit.search import fit as _fit

    return _fit(
        FitRequest(
            model=model,
            gpu=gpu,
            num_gpus=num_gpus,
            context=context,
            nodes=nodes,
            concurrency=concurrency,
            spec=spec,
            spec_steps=spec_steps,
            draft_model=draft_model,
            engine=engine,
            allow_lossy=allow_lossy,
            allow_no_radix=allow_no_radix,
            min_free_gib=min_free_gib,
            top=top,
            env=dict(env or {}),
            gpu_mem_mib=gpu_mem_mib,
            free_gib=free_gib,
            baseline=_baseline_args(baseline, engine) if isinstance(baseline, str) else baseline,
            dist_init_addr=dist_init_addr,
            model_path=model_path,
        )
    )


def _baseline_args(text: str, engine: str) -> dict[str, Any]:
    """Engine args from a launch command or a bare flag string."""
    import shlex

    from servefit._fit.space import space_for
    from servefit.engines.command import parse_launch_command
    from servefit.engines.registry import parse_engine, select
    from servefit.errors import ArgumentError

    try:
        argv = parse_launch_command(text).argv
    except ArgumentError:
        argv = shlex.split(text)
    space = space_for(parse_engine(engine)[0])
    parsed = select(engine)[0].parse_argv(argv)
    if parsed.errors:
        raise ArgumentError(f"baseline: {parsed.errors[0]}")
    values = dict(parsed.values)
    for k in space.model_keys:
        values.pop(k, None)
    return values
