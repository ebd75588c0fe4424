"""The inputs of a fit (FitRequest) and one evaluated candidate (Eval)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servefit._explain.schema import Outcome
from servefit._fit.command import DEFAULT_DIST_ADDR
from servefit.calibration.entry import Entry
from servefit.errors import ArgumentError
from servefit.frozen import frozen
from servefit.model.spec import ModelSpec


@frozen
class FitRequest:
    """What to fit. `num_gpus` is per node; the layouts use num_gpus x nodes GPUs. None: fit
    picks the smallest count (one node) on which a launch starts."""

    model: str | ModelSpec
    gpu: Any
    num_gpus: int | None
    context: int
    nodes: int = 1
    concurrency: int | None = None
    spec: str = "none"  # none | mtp (= nextn) | eagle | eagle3 | standalone | ngram
    spec_steps: int | None = None
    draft_model: str | None = None
    engine: str = "sglang"
    allow_lossy: bool = False  # search fp8 KV and bf16 SSM state (the engine's own flags)
    # search prefix caching off for hybrid models (SGLang --disable-radix-cache, vLLM
    # --no-enable-prefix-caching)
    allow_no_radix: bool = False
    min_free_gib: float | None = None  # None: the engine's (servefit/_explain/catalogue.py)
    top: int = 3
    env: dict[str, str] = field(default_factory=dict)
    gpu_mem_mib: int | None = None
    free_gib: float | None = None
    baseline: dict[str, Any] | None = None  # engine args of a hand-tuned launch, to compare
    dist_init_addr: str = DEFAULT_DIST_ADDR
    model_path: str | None = None  # what --model-path says in the commands
    # recorded starts (servefit/calibration): a layout with an entry of its own release, GPU,
    # model and TP/PP is sized with what that start measured
    calibrations: tuple[Entry, ...] = ()

    # The search runs on a complete request: fit() picks num_gpus and _fit() sets the engine's
    # headroom before anything below reads them.
    @property
    def per_node(self) -> int:
        assert self.num_gpus is not None, "fit picks --num-gpus before the search"
        return self.num_gpus

    @property
    def headroom_gib(self) -> float:
        assert self.min_free_gib is not None, "fit sets the engine's headroom before the search"
        return self.min_free_gib


@dataclass
class Eval:
    tp: int
    pp: int
    outer: str
    running: int | None
    state: str
    fraction: float | None
    args: dict[str, Any]
    outcome: Outcome
    ok: bool


def check(req: FitRequest) -> None:
    for name, val in (
        ("--num-gpus", req.num_gpus),
        ("--nodes", req.nodes),
        ("--context", req.context),
    ):
        if val is None or val < 1:
            raise ArgumentError(f"{name} must be a positive integer, got {val}")
    if req.concurrency is not None and req.concurrency < 1:
        raise ArgumentError(f"--concurrency must be a positive integer, got {req.concurrency}")
    if req.min_free_gib is not None and req.min_free_gib < 0:
        raise ArgumentError(f"--min-free-gib must be >= 0, got {req.min_free_gib}")
    if req.top < 1:
        raise ArgumentError(f"--top must be at least 1, got {req.top}")
