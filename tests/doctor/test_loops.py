"""doctor and verify call an output a loop with one detector (verify/detectors.py): the corpus
of real degenerate and healthy texts (tests/verify/corpus, provenance in its SOURCES.md) reads
the same in a log's finished outputs as in `servefit verify`."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.doctor.accumulate import repeated_unit
from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log
from servefit.verify.detectors import first_loop

CORPUS = Path(__file__).resolve().parents[1] / "verify" / "corpus"
TEXTS = sorted(p for p in CORPUS.glob("*/*") if p.suffix in (".txt", ".md"))


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_doctor_and_verify_agree(path):
    text = path.read_text()
    verdict = first_loop(text)
    assert verdict.degenerate == (path.parent.name == "degenerate")
    unit = repeated_unit(text)
    assert (unit is not None) == verdict.degenerate
    if verdict.tail is not None and verdict.degenerate:
        assert unit == verdict.tail.unit


def test_a_looping_output_in_the_log_is_a_finding(tmp_path):
    loop = (CORPUS / "degenerate" / "wife_loop.txt").read_text()
    log = tmp_path / "serve.log"
    log.write_text(
        "[2026-01-01 00:00:00] Load weight end. elapsed=1.0 s, type=Qwen3ForCausalLM, "
        "dtype=torch.bfloat16, avail mem=20.00 GB, mem usage=10.00 GB.\n"
        "[2026-01-01 00:00:05] The server is fired up and ready to roll!\n"
        f"[2026-01-01 00:00:09] Finish: obj=GenerateReqInput(), out={{'text': {loop!r}}}\n"
    )
    facts = read_log(log)
    launch = facts.launches[-1]
    assert launch.traffic.outputs_logged == 1 and launch.traffic.repeated_outputs == 1
    assert launch.traffic.repeated_unit == first_loop(loop).tail.unit
    report = diagnose(facts, gpu="A6000", replay=False)
    found = next(f for f in report.findings if f.code == "repeated_output")
    assert found.title == "1 of 1 logged outputs repeat themselves"
