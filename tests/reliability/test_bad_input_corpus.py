"""Every case of the bad-input corpus (tests/reliability/corpus.py) gets the class of answer it
is listed with: a clear error, a warning, or a result. A new crash (`internal error`, a
traceback), a hang, or a plan that says it starts with negative free memory fails here."""

from __future__ import annotations

import json
import os
import random
import signal
import struct
from pathlib import Path

import pytest

from servefit.cli.main import main
from tests.model.test_model_safetensors import TINY, tiny_tensors, write_safetensors
from tests.reliability.corpus import BINARY, CASES, CONFIGS, ERROR, RESULT, WARNING, Case

REPO = Path(__file__).resolve().parents[2]
SEED_FAIL = REPO / "tests" / "doctor" / "logs" / "sglang_0_5_9_seed_085_fail.log"
SEED_SERVE = REPO / "tests" / "doctor" / "logs" / "sglang_0_5_9_seed_088_serve.log"
HANG_S = 60  # far beyond any case; only a hang reaches it


def test_the_corpus_is_large_and_covers_every_command():
    assert len(CASES) >= 200
    assert len({c.id for c in CASES}) == len(CASES), "case ids are unique"
    commands = {c.argv[0] for c in CASES}
    assert {
        "plan",
        "explain",
        "fit",
        "doctor",
        "verify",
        "launch",
        "stop",
        "runs",
        "logs",
    } <= commands
    assert {c.expect for c in CASES} == {ERROR, RESULT, WARNING}


# ------------------------------------------------------------------------------ the files


def _raw_safetensors(path: Path, header: dict | bytes, data_len: int, length: int | None = None):
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    size = len(body) if length is None else length
    path.write_bytes(struct.pack("<Q", size) + body + bytes(data_len))


def _checkpoint(root: Path, name: str) -> Path:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY))
    return d


def _checkpoints(root: Path) -> None:
    t = lambda dtype, shape, a, b: {"dtype": dtype, "shape": shape, "data_offsets": [a, b]}  # noqa: E731
    bad = {
        "ckpt_negative_offsets": ({"w": t("BF16", [4], -8, 0)}, 8),
        "ckpt_span_mismatch": ({"w": t("BF16", [4], 0, 6)}, 6),
        "ckpt_overlap": ({"a": t("BF16", [4], 0, 8), "b": t("BF16", [4], 4, 12)}, 12),
        "ckpt_gap": ({"a": t("BF16", [4], 0, 8), "b": t("BF16", [4], 16, 24)}, 24),
        "ckpt_short_buffer": ({"w": t("BF16", [4], 0, 8)}, 4),
        "ckpt_unknown_dtype": ({"w": t("Q3", [4], 0, 8)}, 8),
        "ckpt_negative_shape": ({"w": t("BF16", [-4], 0, 8)}, 8),
    }
    for name, (header, data_len) in bad.items():
        _raw_safetensors(_checkpoint(root, name) / "model.safetensors", header, data_len)
    _raw_safetensors(_checkpoint(root, "ckpt_header_huge") / "model.safetensors", b"{}", 0, 1 << 40)
    _raw_safetensors(
        _checkpoint(root, "ckpt_truncated_header") / "model.safetensors", b'{"a"', 0, 100
    )
    write_safetensors(
        _checkpoint(root, "ckpt_one_of_five") / "model-00002-of-00005.safetensors", tiny_tensors()
    )
    indexes = {
        "ckpt_index_missing_shard": b'{"weight_map": {"x": "gone.safetensors"}}',
        "ckpt_index_traversal": b'{"weight_map": {"x": "../../etc/passwd"}}',
        "ckpt_index_not_utf8": b'{"weight_map": {"x": "\xff.safetensors"}}',
        "ckpt_index_nested": b"[" * 100_000 + b"]" * 100_000,
    }
    for name, index in indexes.items():
        (_checkpoint(root, name) / "model.safetensors.index.json").write_bytes(index)
    write_safetensors(_checkpoint(root, "ckpt_valid") / "model.safetensors", tiny_tensors())


def _logs(root: Path) -> None:
    fail, serve = SEED_FAIL.read_bytes(), SEED_SERVE.read_bytes()
    rng = random.Random(14)
    (root / "empty.log").write_bytes(b"")
    (root / "binary.log").write_bytes(bytes(rng.randrange(256) for _ in range(200_000)))
    torn = b"[2026-04-20 10:02:07 TP0] Load weight begin. avail mem=1.2.3 GB\n"
    (root / "torn.log").write_bytes(torn)
    digits = b"[2026-04-20 10:02:07 TP0] Load weight begin. avail mem=" + b"9" * 400 + b" GB\n"
    (root / "digits.log").write_bytes(digits)
    (root / "seed_torn.log").write_bytes(
        fail.replace(b"avail mem=46.93 GB", b"avail mem=4.6.93 GB")
    )
    (root / "huge_line.log").write_bytes(fail + b"x" * (3 << 20) + b" Load weight begin.\n")
    (root / "no_newline.log").write_bytes(serve[: len(serve) // 2 + 17])
    (root / "latin1.log").write_bytes(fail.replace(b"Load weight", b"Lo\xe9d weight", 3))
    a, b = fail.splitlines(keepends=True), serve.splitlines(keepends=True)
    mixed = [x for pair in zip(a, b, strict=False) for x in pair]
    (root / "interleaved.log").write_bytes(b"".join(mixed))


def _log_shapes(root: Path) -> None:
    """The seed's failing log compressed, re-encoded and re-lined as tools leave logs."""
    import bz2
    import gzip
    import lzma

    import zstandard  # the test extras carry it

    fail = SEED_FAIL.read_bytes()
    text = fail.decode("utf-8")
    gz = gzip.compress(fail)
    shapes = {
        "seed.log.gz": gz,
        "seed.log.xz": lzma.compress(fail),
        "seed.log.lzma": lzma.compress(fail, format=lzma.FORMAT_ALONE),
        "seed.log.bz2": bz2.compress(fail),
        "seed.log.zst": zstandard.ZstdCompressor().compress(fail),
        "seed_named.txt.gz": gz,
        "seed_gz_named.log": gz,  # the magic bytes decide, not the name
        "seed_concatenated.log.gz": gzip.compress(fail[:1000]) + gzip.compress(fail[1000:]),
        "seed_cut.log.gz": gz[: len(gz) * 2 // 3],
        "seed_utf16le_bom.log": text.encode("utf-16"),  # PowerShell's `>`: LE with a BOM
        "seed_utf16be_bom.log": b"\xfe\xff" + text.encode("utf-16-be"),
        "seed_utf16le.log": text.encode("utf-16-le"),
        "seed_utf16_odd.log": text.encode("utf-16") + b"\x00",
        "seed_utf8_bom.log": b"\xef\xbb\xbf" + fail,
        "seed_cr.log": fail.replace(b"\n", b"\r"),
        "seed_crlf.log": fail.replace(b"\n", b"\r\n"),
        "garbage.gz": b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4,
        "empty.log.gz": gzip.compress(b""),
        "bomb.log.gz": gzip.compress(b"\0" * (32 << 20), compresslevel=1),
        "binary.log.gz": gzip.compress(random.Random(15).randbytes(100_000)),
    }
    # a progress bar redrawn with bare CRs just before the error, on the error's own line
    lines = fail.splitlines(keepends=True)
    bar = b"".join(b"\rLoading safetensors: %3d%%" % i for i in range(100))
    lines.insert(len(lines) - 3, bar)
    shapes["seed_progress_cr.log"] = b"".join(lines)
    for name, data in shapes.items():
        (root / name).write_bytes(data)


def _launch_configs(root: Path) -> None:
    """The engines' --config files: YAML as users write it, and damaged."""
    yaml = {
        "tp2_util08.yaml": "tensor-parallel-size: 2\ngpu-memory-utilization: 0.8\n",
        "sglang_tp2.yaml": "tp-size: 2\nmem-fraction-static: 0.8\n",
        "malformed.yaml": "tensor-parallel-size: [2\n",
        "a_list.yaml": "- 1\n- 2\n",
        "unknown_key.yaml": "no-such-option-anywhere: 1\n",
        "empty.yaml": "",
        # aliases that expand to 9**9 values if anything turns them into text
        "billion_laughs.yaml": "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
            for i in range(8)
        ),
    }
    for name, text in yaml.items():
        (root / name).write_text(text)
    (root / "not_utf8.yaml").write_bytes(b"tp-size: \xff\xfe\n")
    (root / "yaml_dir.yaml").mkdir()
    os.mkfifo(root / "fifo.yaml")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    for name, text in CONFIGS.items():
        (d / name).write_text(text)
    for name, data in BINARY.items():
        (d / name).write_bytes(data)
    os.mkfifo(d / "fifo")
    (d / "empty_dir").mkdir()
    (d / "config_is_dir" / "config.json").mkdir(parents=True)
    (d / "plain.txt").write_text("not a directory\n")
    os.symlink(d / "loop", d / "loop")
    (d / "runs").mkdir()
    _checkpoints(d)
    _logs(d)
    _log_shapes(d)
    _launch_configs(d)
    return d


# ------------------------------------------------------------------------------ running


class _Hang(BaseException):  # not an Exception: main() must not turn it into a result
    pass


def _alarm(signum, frame):
    raise _Hang()


def _run(capsys, argv: list[str]) -> tuple[int | None, str, str]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except _Hang:
        code = None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return code, out, err


def _impossible(out: str) -> list[str]:
    """What a plan JSON must never say (servefit/_plan/invariants.py)."""
    try:
        p = json.loads(out)
    except ValueError:
        return []
    if not isinstance(p, dict) or "per_rank" not in p:
        return []
    wrong = []
    if p["verdict"] == "ok" and p["per_rank"]["free_gib"] < 0:
        wrong.append(f"starts with {p['per_rank']['free_gib']:.2f} GiB free")
    for k, v in {**p["per_rank"], **p["pools"]}.items():
        if (
            isinstance(v, (int, float))
            and v < 0
            and k not in ("free_gib", "budget_gib", "kv_budget_gib")
        ):
            wrong.append(f"{k} = {v}")
    return wrong


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, files: Path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)  # the corpus names the repository's logs by relative path
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a model name that is no file never goes online
    argv = [a.replace("{d}", str(files)) for a in case.argv]
    code, out, err = _run(capsys, argv)
    said = out + err
    assert code is not None, f"hang: {case.id} did not end within {HANG_S} s"
    assert "internal error" not in err and "Traceback" not in said, err[-2000:]
    if case.expect == ERROR:
        assert code == 2, f"exit {code}, wanted a clear error: {said[-800:]}"
        last = err.strip().splitlines()[-1] if err.strip() else ""
        assert last.startswith("servefit: error: ") or "Error:" in err, err[-800:]
    else:
        assert code in (0, 1), f"exit {code}, wanted an answer: {said[-800:]}"
        assert not _impossible(out), _impossible(out)
    if case.code is not None:
        assert code == case.code, said[-800:]
    if case.needle:
        assert case.needle in said, f"{case.needle!r} not in: {said[-1500:]}"
