"""doctor never crashes on a log: torn, corrupted, interleaved or hostile lines are skipped and
counted; the fast serving path (doctor/serving.py) gives the same facts as the general one.

Inputs are the repository's real logs (tests/data/ground-truth, captured from real servers, and
the seed logs of tests/doctor/logs) and mutations of them.
"""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log
from servefit.errors import ServefitError

HERE = Path(__file__).resolve().parent
GROUND = HERE.parents[0] / "data" / "ground-truth"
SEED_FAIL = HERE / "logs" / "sglang_0_5_9_seed_085_fail.log"
SEED_SERVE = HERE / "logs" / "sglang_0_5_9_seed_088_serve.log"
REAL = sorted(GROUND.glob("*.txt")) + [SEED_FAIL, SEED_SERVE]
TEXTS = [p.read_bytes() for p in REAL]


def both(tmp_path: Path, data: bytes, name: str = "x.log"):
    """read_log with and without the fast serving path; they must agree."""
    path = tmp_path / name
    path.write_bytes(data)
    fast, slow = read_log(path), read_log(path, fast=False)
    assert fast == slow
    return fast


# ------------------------------------------------------------------------------ torn lines


@pytest.mark.parametrize(
    "line",
    [
        "[2026-04-20 10:02:07 TP0] Load weight begin. avail mem=1.2.3 GB",
        "[2026-04-20 10:02:07 TP0] Load weight begin. avail mem=" + "9" * 400 + " GB",
        "[2026-04-20 10:02:07 TP0] Load weight begin. avail mem=" + "9" * 5000 + " GB",
        "[2026-04-20 10:02:46 TP0] Load weight end. elapsed=38.41 s, type=X, dtype=torch.bfloat16,"
        " avail mem=1.2.3 GB, mem usage=25.49 GB.",
        "[2026-04-20 10:44:40 TP0] Decode batch, #running-req: 1, accept len: 4.0.0, "
        "accept rate: 1.00, gen throughput (token/s): 62.31, #queue-req: 0",
        "[2026-04-20 10:44:40 TP0] Decode batch, #running-req: 1, accept len: 4.00, "
        "gen throughput (token/s): 62.31, #queue-req: 0",
    ],
)
def test_a_torn_line_is_skipped_and_counted(tmp_path, line):
    head = SEED_SERVE.read_bytes()  # a launch that is serving, so decode lines are read
    facts = both(tmp_path, head + line.encode() + b"\n")
    assert facts.skipped_lines == 1 and facts.first_skipped_line == head.count(b"\n") + 1
    report = diagnose(facts, replay=False)
    assert any("could not be read and were skipped" in n for n in report.notes)


def test_numbers_beyond_float_are_skipped_not_crashed_on(tmp_path):
    data = SEED_FAIL.read_bytes().replace(
        b"avail mem=46.93 GB", b"avail mem=" + b"9" * 400 + b" GB"
    )
    facts = both(tmp_path, data)
    assert facts.skipped_lines == 1 and facts.launches_total == 1
    diagnose(facts, replay=True)  # the re-plan of that launch works without the torn value


# ------------------------------------------------------------------------------ not a log


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(ServefitError, match="is a FIFO"):
        read_log(fifo)  # opening it would block until a writer came


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_devices_are_refused(path):
    if not Path(path).exists():
        pytest.skip(f"no {path}")
    with pytest.raises(ServefitError, match="not a regular log file"):
        read_log(path)


# ------------------------------------------------------------------------------ mutations


def _mutate(data: bytes, rng: random.Random, n: int) -> bytes:
    buf = bytearray(data)
    for _ in range(n):
        if not buf:
            break
        op = rng.randrange(9)
        i = rng.randrange(len(buf))
        if op == 0:  # flip a byte
            buf[i] = rng.randrange(256)
        elif op == 1:  # delete a span
            del buf[i : i + rng.randrange(1, 40)]
        elif op == 2:  # insert garbage
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
        elif op == 3:  # a digit run inside a number
            buf[i:i] = b"9" * rng.choice((3, 20, 400))
        elif op == 4:  # a second decimal point
            buf[i:i] = b".5."
        elif op == 5:  # tear a line: cut it and glue the next one on
            j = buf.find(b"\n", i)
            if j >= 0:
                del buf[i : j + 1]
        elif op == 6:  # duplicate a line elsewhere
            a = buf.rfind(b"\n", 0, i) + 1
            b = buf.find(b"\n", i)
            line = bytes(buf[a : b + 1]) if b >= 0 else b""
            k = rng.randrange(len(buf))
            buf[k:k] = line
        elif op == 7:  # a colour code
            buf[i:i] = b"\x1b[31m"
        else:  # a CR line ending
            j = buf.find(b"\n", i)
            if j >= 0:
                buf[j:j] = b"\r"
    return bytes(buf)


def _interleave(a: bytes, b: bytes, rng: random.Random) -> bytes:
    """Two logs written into one file at once (two servers sharing a log)."""
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    out = []
    while la or lb:
        src = la if (la and (not lb or rng.random() < 0.5)) else lb
        out.append(src.pop(0))
    return b"".join(out)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    which=st.integers(0, len(TEXTS) - 1),
    other=st.integers(0, len(TEXTS) - 1),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 60),
    interleave=st.booleans(),
)
def test_mutated_and_interleaved_real_logs_never_crash(tmp_path, which, other, seed, n, interleave):
    rng = random.Random(seed)
    data = TEXTS[which]
    if interleave:
        data = _interleave(data, TEXTS[other], rng)
    data = _mutate(data, rng, n)
    facts = both(tmp_path, data)
    assert facts.skipped_lines >= 0
    diagnose(facts, replay=False)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 30))
def test_a_busy_server_log_reads_the_same_on_both_paths(tmp_path, seed, n):
    """A serving log long enough for the fast path's runs, mutated here and there: every
    mutation either keeps a run readable or sends it down the general path, same facts."""
    lines = SEED_SERVE.read_bytes().splitlines(keepends=True)
    ready = next(i for i, ln in enumerate(lines) if b"fired up" in ln)
    serving = [ln for ln in lines[ready:] if b"batch" in ln or b"HTTP/1.1" in ln]
    rng = random.Random(seed)
    body = b"".join(lines) + b"".join(rng.choice(serving) for _ in range(3000))
    cut = len(b"".join(lines))
    tail = _mutate(body[cut:], rng, n)
    facts = both(tmp_path, body[:cut] + tail)
    launch = facts.launches[-1]
    if n == 0:  # untouched: every serving line counted
        assert launch.ready and launch.traffic.decode_logs + launch.traffic.prefill_batches > 1000
    diagnose(facts, replay=False)


def test_replay_survives_mutated_logs(tmp_path):
    """The re-plan reads numbers out of the log: torn ones must not reach it."""
    rng = random.Random(7)
    for i in range(12):
        data = _mutate(TEXTS[i % len(TEXTS)], rng, 25)
        path = tmp_path / f"m{i}.log"
        path.write_bytes(data)
        diagnose(read_log(path), replay=True)
