"""The numbers of one SGLang 0.5.23 sizing pass (pools.py fills them, logs.py prints them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Budget:
    """The numbers of one sizing pass, all per rank (GiB unless named *_bytes)."""

    P: float
    avail: float
    slack: float
    mm_gib: float
    budget: float  # rest_memory before the state pool
    per_req: int = 0
    K: int | None = None
    ratio: int | None = None
    sizing: str | None = None
    spec_reserved: float = 0.0  # intermediate state reserved inside the budget
    mamba_reserved: float = 0.0
    rest: float = 0.0  # KV budget after the state pool
    error: str | None = None
    error_kind: str | None = None
    notes: list[str] = field(default_factory=list)
