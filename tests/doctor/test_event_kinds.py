"""Every kind of line the doctor recognises has a start-up phase and a handler, and every rule
emits a kind the enum names: the rule tables, PHASE_OF and the handlers cannot drift apart."""

from __future__ import annotations

from servefit.doctor import rules, sglang, vllm
from servefit.doctor.accumulate import HANDLERS, PHASE_OF, PHASES, LaunchAcc
from servefit.doctor.rules import EventKind, Rule


def _rules() -> list[Rule]:
    out = []
    for module in (rules, sglang, vllm):
        for value in vars(module).values():
            if isinstance(value, (list, tuple)):
                out += [r for r in value if isinstance(r, Rule)]
    return out


def test_every_kind_has_a_phase_and_a_handler():
    assert set(PHASE_OF) == set(EventKind)
    assert all(p is None or 0 <= p < len(PHASES) for p in PHASE_OF.values())
    assert set(HANDLERS) == set(EventKind)
    for kind, handler in HANDLERS.items():
        assert handler is getattr(LaunchAcc, f"_on_{kind.value}")


def test_rules_emit_enum_kinds():
    found = _rules()
    assert len(found) > 50
    assert all(isinstance(r.kind, EventKind) for r in found)
    # every kind a rule can emit, plus the two the reader makes itself (a launch command, a
    # Python exception line), is every kind there is
    emitted = {r.kind for r in found} | {EventKind.COMMAND, EventKind.EXCEPTION}
    assert emitted == set(EventKind)


def test_kinds_read_as_their_names():
    assert EventKind("args_dump") is EventKind.ARGS_DUMP
    assert f"{EventKind.KV_POOL}" == str(EventKind.KV_POOL) == "kv_pool"
    assert "kv_pool" in {EventKind.KV_POOL}
