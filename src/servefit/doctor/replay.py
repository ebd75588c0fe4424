"""Re-plan a logged launch with the planner, on the log's own measurements, and search a fix.

The replay passes the launch's arguments (the resolved `server_args` dump when SGLang printed
one) and calibrates the planner with what the log measured: free memory before the weights
("Load weight begin. avail mem", min over ranks, as the engine min-reduces it) and the weights
(that minus "Load weight end ... avail mem"). So a proposed fix is sized with this machine's
CUDA context, NCCL buffers and weights, not the catalog's. Each pool the log printed is compared
with the prediction; a gap above 1 % is reported as a possible planner error.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from servefit.doctor.calibration import kv_memory_set, measured, measurements
from servefit.doctor.facts import LaunchFacts
from servefit.doctor.schema import Finding, Fix, FixChange, FixOption, PoolCheck, Replay
from servefit.doctor.vllm import CPU_FEATURE_OF
from servefit.engines import registry
from servefit.engines.vllm.cpu_platform import ENV_KV_SPACE
from servefit.errors import EngineVersionError, ServefitError
from servefit.hardware.host import HostMemory
from servefit.hardware.spec import GPUSpec
from servefit.units import GiB

GAP_PCT = 1.0
ROUNDING_GIB = 0.005  # SGLang prints GB with 2 decimals
MARGIN_GIB = 1.0  # free memory a fix must leave after the pools (activations, CUDA graphs)


def engine_spec(launch: LaunchFacts, override: str | None) -> tuple[str, str | None]:
    """'sglang==V' / 'vllm==V' for the registry, and how the version was found."""
    if override:
        return override, "--engine"
    name = launch.engine.name or "sglang"
    if launch.engine.version:
        return f"{name}=={launch.engine.version.split('+')[0]}", launch.engine.version_source
    if name == "sglang":
        match = registry.family_profile(name, launch.engine.format_family)
        return f"sglang=={match.profile}", (
            f"inferred: SGLang does not print its version; {match.why}"
        )
    return name, "not printed"


def _model(ref: Any, launch: LaunchFacts, notes: list[str]):
    from servefit._plan.planner import resolve_model

    candidates: list[Any] = [ref] if ref is not None else []
    if launch.model:
        candidates.append(launch.model)
        base = os.path.basename(str(launch.model).rstrip("/"))
        from servefit.catalog import entries

        candidates += [e.id for e in entries() if e.id.split("/")[-1].lower() == base.lower()]
    errors = []
    for c in candidates:
        try:
            spec = resolve_model(c)
        except ServefitError as exc:
            errors.append(f"{c}: {exc}")
            continue
        if c is not ref and c != launch.model:
            notes.append(f"model {launch.model!r} read from the bundled catalog entry {c}")
        return spec
    raise ServefitError(
        "re-planning needs the model's config.json: pass --model (a path, a catalog id from "
        "`servefit models`, or a Hub id)" + (f"; tried {'; '.join(errors)}" if errors else "")
    )


def log_cpu(launch: LaunchFacts) -> GPUSpec | None:
    """vLLM's CPU platform as the log shows it: the NUMA node's memory from "Explicitly set
    (kv/node) GiB for KV cache on node N." (vllm/v1/worker/cpu_worker.py:
    CPUWorker.determine_available_memory), and the ISA features the platform's logged changes
    reveal (vllm/platforms/cpu.py:CpuPlatform.check_and_update_config). A feature whose change
    is not logged changed nothing in this launch, so leaving it out replays the same sizing."""
    pools = launch.pools
    total = pools.cpu_node_memory_gib
    if total is None:
        return None
    features = frozenset(CPU_FEATURE_OF[c.why] for c in launch.changes if c.why in CPU_FEATURE_OF)
    after = pools.cpu_node_available_gib  # the worker's own figure, once the engine was up
    host = HostMemory(
        node=pools.cpu_node or 0,
        node_meminfo=None,
        system_total=round(total * GiB),
        system_available=None,
        available_after_load=round(after * GiB) if after is not None else None,
    )
    return device_from_log(
        "cpu", "CPU from the log", round(total * 1024), vendor="cpu", context_mib=0.0,
        features=features, host=host,
    )  # fmt: skip


def device_from_log(key: str, name: str, memory_mib: int, **extra: Any) -> GPUSpec:
    """A device known only by the memory its log shows (no speed figures: a replay sizes)."""
    return GPUSpec(
        key=key, name=name, memory_mib=memory_mib, bandwidth_gbs=0.0, bf16_tflops=0.0, **extra
    )


def cpu_kv_memory(
    launch: LaunchFacts, args: dict[str, Any], notes: list[str]
) -> tuple[dict[str, Any], dict[str, str]] | None:
    """(args, env) that give the replay the KV memory the CPU worker logged: the launch's
    --kv-cache-memory-bytes when the logged size is it, else VLLM_CPU_KVCACHE_SPACE (whole GiB,
    which CpuPlatform.check_and_update_config puts over the flag). The doctor's own
    environment never leaks in (an empty VLLM_CPU_KVCACHE_SPACE is unset for the engine)."""
    logged = next((r.kv_available_gib for r in launch.ranks if r.kv_available_gib), None)
    if logged is None:
        return None
    given = args.get("kv_cache_memory_bytes")
    # format_gib: the logged figure is round(bytes / GiB, 2)
    if given and round(int(given) / GiB, 2) == logged:
        notes.append(
            f"CPU platform: KV memory {int(given):,} B (--kv-cache-memory-bytes, as logged)"
        )
        return args, {ENV_KV_SPACE: ""}
    if float(logged).is_integer():
        notes.append(f"CPU platform: KV memory {ENV_KV_SPACE}={int(logged)} (as logged)")
        return args, {ENV_KV_SPACE: str(int(logged))}
    notes.append(f"CPU platform: KV memory {logged} GiB as logged (rounded to 0.01 GiB)")
    return {**args, "kv_cache_memory_bytes": int(logged * GiB)}, {ENV_KV_SPACE: ""}


def _gpu(ref: Any, launch: LaunchFacts, P: float | None, notes: list[str]):
    from servefit.hardware.catalog import find_gpu

    if ref is not None:
        return ref
    cpu = log_cpu(launch)
    if cpu is not None:
        return cpu
    if launch.gpu:
        found = find_gpu(launch.gpu)
        if found is not None:
            return found
    total = launch.pools.profile_total_gpu_gib
    if total is None and P is None:
        if any(c.why in CPU_FEATURE_OF for c in launch.changes):  # the CPU platform's changes
            raise ServefitError(
                "re-planning needs the machine: this log is vLLM's CPU platform, which did not "
                "print its memory; pass --gpu cpu to replay it on this machine's CPU"
            )
        raise ServefitError(
            "re-planning needs the GPU: pass --gpu NAME (see `servefit gpus`), or --gpu cpu "
            "for a log of vLLM's CPU platform"
        )
    gib = total if total is not None else math.ceil(P + 1.0)
    notes.append(
        f"GPU not named in the log: a {gib:g} GiB GPU is assumed; pass --gpu for the engine's "
        "GPU-dependent defaults"
    )
    return device_from_log("from-log", "GPU from the log", int(gib * 1024))


def _args(
    launch: LaunchFacts,
    profile: str,
    engine: str,
    command_args: dict[str, Any] | None,
    notes: list[str],
    use_command: bool = False,
) -> dict[str, Any]:
    src = dict(command_args or {}) if use_command else dict(launch.args)
    if not src and command_args:
        src = dict(command_args)
        notes.append("the log does not print its arguments: the replay uses --command's")
    if engine != "sglang":
        return {k: v for k, v in src.items() if v is not None}
    dests = {f.dest for f in registry.profile(engine, profile).flags}
    out = {k: v for k, v in src.items() if k in dests and v is not None and k != "model_path"}
    # the dump is post-resolution: these say what the engine did, not what the user asked
    if isinstance(out.get("speculative_algorithm"), str):
        out["speculative_algorithm"] = out["speculative_algorithm"].upper()
    return out


def _unread(launch: LaunchFacts, engine: str, P: float | None, W: float | None) -> list[str]:
    """The measured figures the replay wanted and the log did not print: modelled instead."""
    out = []
    if engine == "sglang" and P is None:
        out.append("not in the log: \"Load weight begin. avail mem\"; free memory modelled")
    if W is None:
        line = "Load weight end ... mem usage" if engine == "sglang" else "Model loading took"
        out.append(f"not in the log: \"{line}\"; weights modelled from the config")
    return out


def replay(
    launch: LaunchFacts,
    *,
    model: Any = None,
    gpu: Any = None,
    engine: str | None = None,
    command_args: dict[str, Any] | None = None,
    command_env: Mapping[str, str] | None = None,
    use_command: bool = False,
) -> tuple[Replay | None, Any, list[Finding]]:
    """(Replay, the Plan and its PlanRequest for the fix search, findings about the replay).
    `command_env`: the environment --command sets (a launch's own, from `servefit launch`)."""
    from servefit._plan.planner import PlanRequest, plan
    from servefit.engines.registry import select

    spec, how = engine_spec(launch, engine)
    try:
        _, ref = select(spec)
    except EngineVersionError as exc:
        name = spec.split("=")[0]
        return (
            None,
            None,
            [
                Finding(
                    code="replan_unavailable",
                    severity="info",
                    title=f"re-planning {name} logs needs a {name} profile",
                    detail=f"{exc}. The facts above come from the log alone.",
                )
            ],
        )
    notes: list[str] = []
    if how and how != "--engine":
        notes.append(f"engine version {how}")
    P, W = measured(launch)
    notes += _unread(launch, ref.name, P, W)
    try:
        model_spec = _model(model, launch, notes)
        gpu_spec = _gpu(gpu, launch, P, notes)
        args = _args(launch, ref.profile, ref.name, command_args, notes, use_command)
        env = dict(command_env or {})
        on_cpu = getattr(gpu_spec, "vendor", None) == "cpu" or gpu_spec == "cpu"
        kv = cpu_kv_memory(launch, args, notes) if on_cpu and not use_command else None
        if kv is not None:  # the KV memory the worker logged wins over the command's
            args, kv_env = kv
            env |= kv_env
        request = PlanRequest(
            model=model_spec,
            gpu=gpu_spec,
            engine=spec,
            args=args,
            env=env,
            measured_free_before_gib=P,
            measured_weights_gib=W,  # vLLM prints no free memory: its weights alone
        )
        if ref.name == "vllm" and not on_cpu:  # the log's "Available KV cache memory"
            request = _with_nonkv(request, launch, args, env, notes, use_command)
        p = plan(request)
    except ServefitError as exc:
        return (
            None,
            None,
            [
                Finding(
                    code="replan_failed",
                    severity="info",
                    title="the planner could not replay this launch",
                    detail=str(exc),
                )
            ],
        )
    if use_command:  # a different launch: nothing logged to compare with
        return _summary(p, args, notes, P, W, ref, []), (p, request), []
    checks = compare(launch, p)
    rep = _summary(p, args, notes, P, W, ref, checks)
    if kv is not None:
        # the CPU worker sizes nothing at run time but the KV memory, read here from the log
        rep = rep.model_copy(update={"calibrated": True})
    return rep, (p, request), _gap_findings(launch, p, checks)


def _with_nonkv(
    request: Any,
    launch: LaunchFacts,
    args: dict[str, Any],
    env: dict[str, str],
    notes: list[str],
    use_command: bool,
) -> Any:
    """vLLM: the request with the log's own non-KV memory. The engine prints only what its
    profiling run left ("Available KV cache memory", gpu_worker.py:determine_available_memory),
    so the log's launch is planned with servefit's model and the difference becomes a measured
    correction (calibration/apply.py); the replay then sizes the KV cache from the logged figure."""
    logged = measurements(launch).kv_available_gib
    if kv_memory_set(launch, args):
        return request
    if logged is None:
        notes.append(
            "not in the log: \"Available KV cache memory\"; the profiling run is servefit's model"
        )
        return request
    log_request = request
    if use_command:  # the correction belongs to the log's launch, not to --command's
        log_args = _args(launch, request.engine.split("==")[-1], "vllm", None, [], False)
        log_request = replace(request, args=log_args or args, env=env)
    from servefit.calibration.apply import correction_of

    try:
        correction = correction_of(log_request, logged)
    except ServefitError:
        return request
    notes.append(
        f"non-KV memory from the log: {logged:g} GiB available for the KV cache, "
        f"{correction:+.3f} GiB against servefit's model of the profiling run"
    )
    return replace(request, measured_nonkv_correction_gib=correction)


def _gap_findings(launch: LaunchFacts, p: Any, checks: list[PoolCheck]) -> list[Finding]:
    """Where the planner's prediction and the log disagree: pool sizes by more than 1 %, or the
    verdict."""
    findings: list[Finding] = []
    flagged = [c for c in checks if c.flagged]
    if flagged:
        findings.append(
            Finding(
                code="planner_gap",
                severity="warning",
                title="the planner's prediction differs from the log by more than 1 %",
                detail="; ".join(
                    f"{c.name}: logged {c.logged:g}, predicted {c.predicted:g} ({c.gap_pct:+.2f} %)"
                    for c in flagged
                )
                + ". Possible planner error (or a log from a different build); please report it with the log.",
                numbers={c.name: c.gap_pct for c in flagged},
            )
        )
    logged_fail = launch.outcome == "failed" and any(
        e.kind == "startup_memory" for e in launch.errors
    )
    if logged_fail and p.verdict == "ok":
        findings.append(
            Finding(
                code="planner_gap",
                severity="warning",
                title="the planner says this launch starts, the log says it failed",
                detail="Possible planner error; please report it with the log.",
            )
        )
    if launch.ready and p.verdict == "fail":
        findings.append(
            Finding(
                code="planner_gap",
                severity="warning",
                title="the planner predicts a failure, the log says it started",
                detail=f"predicted: {p.error}. Possible planner error.",
            )
        )
    return findings


def _summary(p, args, notes, P, W, ref, checks) -> Replay:
    return Replay(
        engine=f"{ref.name}=={ref.profile}",
        engine_note=p.engine.note,
        model=p.model.name,
        gpu=p.hardware.gpu,
        measured_free_before_gib=P,
        measured_weights_gib=W,
        measured_nonkv_correction_gib=_correction(p),
        calibrated=p.calibrated,
        args=args,
        verdict=p.verdict,
        error=p.error,
        error_consumer=p.error_consumer,
        error_detail=p.error_detail,
        kv_tokens=p.pools.max_total_num_tokens,
        max_mamba_cache_size=p.pools.max_mamba_cache_size,
        mamba_slots_per_request=p.pools.mamba_slots_per_request,
        mamba_sizing=p.pools.mamba_sizing,
        effective_max_running_requests=p.pools.effective_max_running_requests,
        free_after_pools_gib=round(p.per_rank.free_gib, 3),
        checks=checks,
        notes=notes,
    )


def _correction(p: Any) -> float | None:
    c = next((c for c in p.consumers if c.name == "calibration correction"), None)
    return round(c.gib, 4) if c is not None else None


def _check(
    name: str, unit: str, logged: float | None, predicted: float | None, exact: bool = False
) -> PoolCheck | None:
    """exact: a setting the engine derives (a block size), where any difference is an error."""
    if logged is None or predicted is None or logged == 0:
        return None
    gap = (predicted - logged) / logged * 100
    flagged = predicted != logged if exact else abs(gap) > GAP_PCT
    if unit == "GiB":
        flagged = flagged and abs(predicted - logged) > ROUNDING_GIB
    return PoolCheck(
        name=name,
        unit=unit,
        logged=logged,
        predicted=round(predicted, 4),
        gap_pct=round(gap, 3),
        flagged=flagged,
    )


def compare(launch: LaunchFacts, p) -> list[PoolCheck]:
    """Logged pools against the replay (SGLang field names; vLLM where the plan has them)."""
    lp = launch.pools
    out: list[PoolCheck | None] = []
    if p.verdict == "ok":
        tokens = lp.kv_tokens if lp.kv_tokens is not None else lp.max_total_num_tokens
        if launch.engine.name == "vllm":
            tokens = lp.gpu_kv_cache_tokens
            # "Setting attention block size to N tokens ..." (vllm/platforms/interface.py:
            # Platform._align_hybrid_block_size): the block every KV figure is counted in
            out.append(
                _check(
                    "attention block size",
                    "tokens",
                    lp.attention_block_size,
                    p.pools.block_size,
                    exact=True,
                )
            )
            out.append(
                _check(
                    "max concurrency at max_model_len",
                    "requests",
                    lp.max_concurrency,
                    p.pools.max_concurrency_at_context,
                )
            )
        out.append(_check("KV tokens", "tokens", tokens, p.pools.max_total_num_tokens))
        out.append(
            _check(
                "state slots (max_mamba_cache_size)",
                "slots",
                lp.max_mamba_cache_size,
                p.pools.max_mamba_cache_size,
            )
        )
        out.append(_check("KV cache size", "GiB", lp.kv_size_gib, p.per_rank.kv_cache_gib))
        if lp.conv_state_gib is not None and lp.ssm_state_gib is not None:
            out.append(
                _check(
                    "state pool size (conv + ssm)",
                    "GiB",
                    lp.conv_state_gib + lp.ssm_state_gib,
                    p.per_rank.mamba_state_gib,
                )
            )
        if lp.intermediate_ssm_gib is not None and lp.intermediate_conv_gib is not None:
            out.append(
                _check(
                    "speculative intermediate state",
                    "GiB",
                    lp.intermediate_ssm_gib + lp.intermediate_conv_gib,
                    p.per_rank.spec_state_gib,
                )
            )
        mrr = lp.max_running_requests
        if mrr is None:
            caps = [
                c.new
                for c in launch.changes
                if c.arg == "max_running_requests" and "capped" in c.why
            ]
            mrr = caps[-1] if caps else None
        out.append(
            _check("max_running_requests", "requests", mrr, p.pools.effective_max_running_requests)
        )
    out.append(_check("context length", "tokens", lp.context_len, p.pools.context_len))
    return [c for c in out if c is not None]


# ---------------------------------------------------------------------------------------------
# Fix search
# ---------------------------------------------------------------------------------------------


def propose_fix(plan_and_request, flags_hint: list[str] | None = None) -> Fix | None:
    """The minimal fix of `servefit explain` (fewest flags, least loss of concurrency and
    context), searched on this machine's measured figures: the request is the calibrated replay.
    One search serves both commands, so `explain` and `doctor` propose the same change."""
    from servefit._explain.catalogue import context_for
    from servefit._explain.fix import minimal_fix
    from servefit._explain.outcome import outcome
    from servefit._explain.replan import prepared

    p, request = plan_and_request
    req, model = prepared(request)
    ctx = context_for(req, p, model)
    found = minimal_fix(ctx, outcome(p), min_free_gib=ctx.catalogue.min_free_gib, gpus=False)
    if not found.found or found.best is None:
        return None
    # the best change first, then the one closest to what the launch asked, then the others
    picked = [found.best]
    if found.minimal is not None and found.minimal.command_flags != found.best.command_flags:
        picked.append(found.minimal)
    options = [_option(c) for c in [*picked, *found.alternatives[:2]]]
    return Fix(best=options[0], alternatives=options[1:], source="replay")


def _option(c) -> FixOption:
    o = c.outcome
    return FixOption(
        changes=[FixChange(arg=ch.dest, flag=ch.flag, old=ch.old, new=ch.new) for ch in c.changes],
        kv_tokens=o.kv_tokens,
        max_running_requests=o.max_running_requests,
        free_after_pools_gib=round(o.free_gib, 2),
        why=(
            f"{c.command_flags}: predicted to start with {o.kv_tokens:,} KV tokens, "
            f"{o.max_running_requests} running requests ({o.effective_concurrency:.2f} "
            f"requests of {o.target_context:,} tokens at once) and {o.free_gib:.2f} GiB left "
            "per rank after the pools"
        ),
    )


def fixed_command(command: str, fix: Fix, engine: str, profile: str | None) -> str | None:
    """`command` with the fix's flags set (replaced in place, or added)."""
    from servefit.doctor.launches import quote_command
    from servefit.engines.command import parse_launch_command

    try:
        cmd = parse_launch_command(command)
    except ServefitError:
        return None
    # the words as typed: a --config FILE stays (its options are not inlined), and a fix added
    # after it wins, since both engines let the command line override the file
    argv = list(cmd.written_argv or cmd.argv)
    given: dict[str, str] = {}
    if profile:
        given = dict(registry.profile(cmd.engine, profile).parse_argv(argv).given)
    for ch in fix.best.changes:
        canonical = given.get(ch.arg, ch.flag)
        value = _cli_value(ch.new)
        for i, tok in enumerate(argv):
            name, eq, _ = tok.partition("=")
            # argparse accepts any unambiguous prefix of a long option (--speculative-algo),
            # and vLLM underscores for dashes (--max_model_len)
            if not (
                name == canonical
                or name.startswith("--")
                and len(name) > 2
                and canonical.replace("_", "-").startswith(name.replace("_", "-"))
            ):
                continue
            if eq:
                argv[i] = f"{name}={value}"
                break
            if i + 1 < len(argv):
                argv[i + 1] = value
                break
        else:
            argv += [ch.flag, value]
    return quote_command(cmd.entrypoint, argv, cmd.env)


def _cli_value(v: Any) -> str:
    """A fix value as the engines read it: floats short, config dicts as JSON."""
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return json.dumps(v, separators=(",", ":"))
    return str(v)
