"""Entries as `servefit doctor` records them, for the calibration tests."""

from __future__ import annotations

from typing import Any

from servefit._plan.planner import PlanRequest, plan, resolve_model
from servefit.calibration.entry import Entry, Measurements, entry_id, fingerprint


def entry_for(request: PlanRequest, measured: Measurements, source: str = "/logs/a.log") -> Entry:
    """The entry a log of `request`'s launch gives, with `measured` its printed figures: the
    layout and the GPU as the replay's plan names them (calibration/record.py:from_replay)."""
    p = plan(request)
    model = resolve_model(request.model)
    h = p.hardware
    fields: dict[str, Any] = dict(
        source=source,
        source_kind="doctor",
        launch_index=1,
        engine=p.engine.name,
        profile=p.engine.profile,
        engine_version=None,
        gpu=h.gpu,
        gpu_memory_mib=h.memory_mib,
        num_gpus=h.num_gpus,
        model=p.model.name,
        model_fingerprint=fingerprint(model),
        tp=h.tp_size,
        pp=h.pp_size,
        dp=h.dp_size,
        ep=h.ep_size,
        args=dict(request.args),
        outcome="ready",
    )
    blob = {**fields, "measured": measured.model_dump(mode="json")}
    return Entry(id=entry_id(blob), recorded="2026-12-03T10:00:00Z", measured=measured, **fields)
