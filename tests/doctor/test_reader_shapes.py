"""A log reads the same in every shape it comes in (doctor/logfile.py, doctor/reader.py).

Two real failing logs, SGLang's seed launch (tests/doctor/logs) and a recorded vLLM start-up
(tests/data/engine-logs), are written compressed (gzip, xz, legacy lzma, bzip2, zstd),
re-encoded (UTF-16 LE / BE with and without a byte-order mark, UTF-8 with one), with CRLF or
bare-CR line ends, and piped through standard input: each must give the facts, the root cause
and the findings of the plain file. Then what a stream can do to a reader: a decompression
bomb, a cut or corrupt gzip, a progress bar redrawn for megabytes before the error.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import io
import json
import lzma
import os
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from servefit.doctor import logfile
from servefit.doctor.diagnose import diagnose
from servefit.doctor.facts import LogFacts
from servefit.doctor.launches import read_log
from servefit.doctor.reader import LineSource
from servefit.errors import ServefitError
from tests.clihelp import run

HERE = Path(__file__).resolve().parent
SGLANG = HERE / "logs" / "sglang_0_5_9_seed_085_fail.log"
SERVE = HERE / "logs" / "sglang_0_5_9_seed_088_serve.log"
# vLLM 0.32 on its CPU platform, max_model_len beyond the KV cache; it has CRLF lines (the
# banner) and tqdm's lone CRs ("\rLoading safetensors checkpoint shards: ...")
VLLM = HERE.parents[0] / "data" / "engine-logs" / "v0320-qwen3-fail-max-model-len.log"
LOGS = {"sglang": SGLANG, "vllm": VLLM}


def _zstd_compress() -> Callable[[bytes], bytes] | None:
    for name in ("compression.zstd", "backports.zstd"):
        try:
            return importlib.import_module(name).compress  # type: ignore[no-any-return]
        except ImportError:
            pass
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        return None
    return zstandard.ZstdCompressor(level=19).compress  # type: ignore[no-any-return]


ZSTD = _zstd_compress()
NO_ZSTD = (
    "no zstd module here (Python 3.14's compression.zstd, backports.zstd or zstandard): "
    "zstd logs are not read, so the zstd shape is not checked"
)


def _lf_only(data: bytes) -> bytes:
    """The log with LF line ends only, tqdm's CR at the start of a line dropped: the same
    lines, as a bare-CR or CRLF file holds them."""
    out = data.replace(b"\r\n", b"\n").replace(b"\n\r", b"\n")
    assert b"\r" not in out
    return out


def _utf16(data: bytes, codec: str, bom: bytes) -> bytes:
    return bom + data.decode("utf-8").encode(codec)


SHAPES: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "xz": lzma.compress,
    "lzma": lambda d: lzma.compress(d, format=lzma.FORMAT_ALONE),
    "bzip2": bz2.compress,
    "gzip, two members": lambda d: gzip.compress(d[:5000]) + gzip.compress(d[5000:]),
    "utf-16-le bom": lambda d: _utf16(d, "utf-16-le", b"\xff\xfe"),
    "utf-16-be bom": lambda d: _utf16(d, "utf-16-be", b"\xfe\xff"),
    "utf-16-le no bom": lambda d: _utf16(d, "utf-16-le", b""),
    "utf-16-be no bom": lambda d: _utf16(d, "utf-16-be", b""),
    "utf-8 bom": lambda d: b"\xef\xbb\xbf" + d,
    "crlf": lambda d: _lf_only(d).replace(b"\n", b"\r\n"),
    "bare cr": lambda d: _lf_only(d).replace(b"\n", b"\r"),
    "gzip of utf-16-le bom, crlf": lambda d: gzip.compress(
        _utf16(_lf_only(d).replace(b"\n", b"\r\n"), "utf-16-le", b"\xff\xfe")
    ),
}


def _facts(log: LogFacts) -> dict:
    return log.model_dump(exclude={"path", "size_bytes", "modified", "read_notes"})


def _diagnosis(log: LogFacts) -> dict:
    report = diagnose(log, replay=False)
    return {
        "status": report.status,
        "root_cause": report.root_cause.model_dump() if report.root_cause else None,
        "findings": [(f.code, f.title, f.detail) for f in report.findings],
    }


@pytest.fixture(scope="module")
def plain() -> dict[str, tuple[dict, dict]]:
    out = {}
    for name, path in LOGS.items():
        log = read_log(path)
        assert log.launches and log.launches[-1].outcome == "failed"
        out[name] = (_facts(log), _diagnosis(log))
    return out


def _same_as_plain(plain: dict, name: str, log: LogFacts) -> None:
    facts, diagnosis = plain[name]
    assert _diagnosis(log) == diagnosis
    assert _facts(log) == facts  # the same lines, at the same line numbers


# ------------------------------------------------------------------------------ shapes


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", LOGS)
def test_every_shape_reads_as_the_plain_file(tmp_path, plain, name, shape):
    path = tmp_path / "engine.log.1"  # no suffix: the shape is told by the bytes
    path.write_bytes(SHAPES[shape](LOGS[name].read_bytes()))
    log = read_log(path)
    _same_as_plain(plain, name, log)
    guessed = ["read as UTF-16"] if "no bom" in shape else []
    assert [n[:14] for n in log.read_notes] == guessed  # a guess is said, nothing else


@pytest.mark.skipif(ZSTD is None, reason=NO_ZSTD)
@pytest.mark.parametrize("name", LOGS)
def test_zstd_reads_as_the_plain_file(tmp_path, plain, name):
    assert ZSTD is not None
    data = LOGS[name].read_bytes()
    path = tmp_path / "engine.log.zst"
    first, second = ZSTD(data[:3000]), ZSTD(data[3000:])
    path.write_bytes(first + second)  # two frames, as `zstd -c a b` writes them
    _same_as_plain(plain, name, read_log(path))
    log = read_log(io.BytesIO(first + second[: len(second) // 2]))  # the second frame cut
    assert log.read_notes[0].startswith("the zstd data breaks off after 3,000 bytes of text")
    with pytest.raises(ServefitError, match="as zstd: "):  # the module's own error: one line
        read_log(io.BytesIO(first[:4] + b"\xff" * 64))


def test_without_a_zstd_module_a_zstd_log_is_one_line_naming_the_package(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(logfile, "_zstd_factory", lambda: None)
    path = tmp_path / "engine.log"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 32)  # a zstd frame's magic
    code, out, err = run(capsys, "doctor", str(path))
    assert code == 2 and out == ""
    assert err == (
        f"servefit: error: {path} is zstd-compressed and this Python has no zstd module: "
        "pip install zstandard (or decompress it first: zstd -d)\n"
    )


@pytest.fixture
def piped(monkeypatch) -> Iterator[Callable[[bytes], None]]:
    """Standard input as a real pipe (no seek, no size), fed by a thread."""
    threads: list[threading.Thread] = []
    readers: list[io.TextIOWrapper] = []

    def feed(data: bytes) -> None:
        r, w = os.pipe()

        def write() -> None:
            with os.fdopen(w, "wb") as fh:
                fh.write(data)

        threads.append(threading.Thread(target=write, daemon=True))
        threads[-1].start()
        readers.append(io.TextIOWrapper(os.fdopen(r, "rb")))
        monkeypatch.setattr(sys, "stdin", readers[-1])

    yield feed
    for t in threads:
        t.join(5)
    for reader in readers:
        reader.close()


@pytest.mark.parametrize("arg", ["-", "/dev/stdin"])
@pytest.mark.parametrize("name", LOGS)
def test_standard_input_is_read_once_as_a_stream(plain, piped, name, arg):
    piped(gzip.compress(LOGS[name].read_bytes()))
    log = read_log(arg)
    assert log.path == arg and log.size_bytes is None
    _same_as_plain(plain, name, log)


def _json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, "doctor", *argv, "--format", "json")
    assert code == 1 and err == "", err
    report = json.loads(out)
    report.pop("path")
    # the calibration entry names its source (and so its id differs): the figures must not
    entry = report["calibration"]
    for k in ("source", "id", "recorded"):
        entry.pop(k)
    return report


def test_the_doctor_command_reports_the_same_on_a_gzip_file_and_on_stdin(tmp_path, capsys, piped):
    """`servefit doctor` end to end, re-plan included: logrotate's engine.log.1.gz, and the
    same bytes piped in, give the plain file's report."""
    want = _json(capsys, str(SGLANG))
    assert want["root_cause"]["kind"] == "startup_memory"
    rotated = tmp_path / "engine.log.1.gz"
    rotated.write_bytes(gzip.compress(SGLANG.read_bytes()))
    assert _json(capsys, str(rotated)) == want
    piped(rotated.read_bytes())
    assert _json(capsys, "-") == want


# ------------------------------------------------------------------------------ line ends


@pytest.mark.parametrize("case", ["before the error", "around the error", "one long piece"])
def test_a_progress_bar_redrawn_for_megabytes_does_not_hide_the_error(plain, case):
    """tqdm redraws with CR and no LF: 30,000 redraws (2.6 MB: past MAX_LINE, across read
    blocks) run into the error line, or go on after it (the error then a piece in the middle
    of a long CR-only run), or one piece is itself over MAX_LINE (a bar 2 MB wide) before
    the CR and the error; a reader that ends lines at LF only cuts the error off with the bar."""
    data = SGLANG.read_bytes()
    at = data.index(b"RuntimeError: Not enough memory")
    end = data.index(b"\n", at)
    bar = b"".join(
        b"Capturing batches (bs=%d avail_mem=12.38 GB): %3d%%|###| %d/36 [00:01<00:00]\r"
        % (i, i % 100, i)
        for i in range(30_000)
    )
    assert len(bar) > 2 * LineSource.CHUNK
    if case == "before the error":
        shaped = data[:at] + bar + data[at:]
    elif case == "around the error":
        short = bar[: bar.index(b"\r", 200_000) + 1]
        shaped = data[:at] + short + data[at:end] + b"\r" + bar + data[end:]
    else:
        wide = b"Loading: |" + b"#" * (2 * LineSource.CHUNK) + b"| 100%\r"
        shaped = data[:at] + wide + data[at:]
    _same_as_plain(plain, "sglang", read_log(io.BytesIO(shaped)))


def test_a_line_redrawn_with_cr_counts_once_at_its_own_line_number():
    """The pieces of one LF line share its number, and a key read in one piece is not read
    again in a later piece of that line: five redraws of a decode line are one decode line."""
    lines = SERVE.read_bytes().split(b"\n")
    i = next(n for n, ln in enumerate(lines) if b"Decode batch" in ln)
    redrawn = [*lines[:i], b"\r".join([lines[i]] * 5), *lines[i + 1 :]]
    once, fivefold = (
        read_log(io.BytesIO(SERVE.read_bytes())),
        read_log(io.BytesIO(b"\n".join(redrawn))),
    )
    assert _facts(fivefold) == _facts(once)
    assert once.launches[-1].traffic.decode_logs >= 1


# ------------------------------------------------------------------------------ hostile streams


def test_a_gzip_bomb_stops_at_the_cap_in_bounded_memory(monkeypatch):
    """16 KB of gzip that inflates to 16 MiB of lines, under a 1 MiB cap: reading stops at the
    cap (the lines counted say so), memory stays at a block, and a note tells why."""
    monkeypatch.setattr(logfile, "MAX_STREAM", 1 << 20)
    bomb = gzip.compress(b"x\n" * (8 << 20), 9)
    assert len(bomb) < 64 << 10
    tracemalloc.start()
    log = read_log(io.BytesIO(bomb))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert log.lines == (1 << 20) // 2  # the cap's worth of "x\n", not 8 Mi lines
    assert peak < 8 << 20
    assert log.read_notes == [
        "only the first 1,048,576 bytes of its decompressed text were read: servefit reads no "
        "more of a stream (a log this long, or a decompression bomb)"
    ]
    assert any("decompression bomb" in n for n in diagnose(log, replay=False).notes)


def test_a_bzip2_bomb_of_a_few_kilobytes_is_bounded_too(monkeypatch):
    monkeypatch.setattr(logfile, "MAX_STREAM", 1 << 20)
    bomb = bz2.compress(b"\0" * (16 << 20))
    assert len(bomb) < 200
    log = read_log(io.BytesIO(bomb * 64))  # 64 streams: 1 GiB of NULs
    assert log.lines == 1 and "decompression bomb" in log.read_notes[0]


def test_a_stream_exactly_at_the_cap_is_read_whole_without_a_note(monkeypatch):
    data = SGLANG.read_bytes()
    monkeypatch.setattr(logfile, "MAX_STREAM", len(data))
    log = read_log(io.BytesIO(gzip.compress(data)))
    assert log.read_notes == [] and log.lines == data.count(b"\n")


def test_a_gzip_cut_before_its_trailer_gives_the_findings_and_a_note(plain):
    packed = gzip.compress(SGLANG.read_bytes())
    log = read_log(io.BytesIO(packed[:-4]))  # logrotate still compressing, or a copy cut
    facts, diagnosis = plain["sglang"]
    assert _diagnosis(log)["root_cause"] == diagnosis["root_cause"]
    assert log.read_notes == [
        f"the gzip data breaks off after {len(SGLANG.read_bytes()):,} bytes of text (cut short "
        "before its end marker): the text before it was read"
    ]
    notes = diagnose(log, replay=False).notes
    assert notes[0] == log.read_notes[0]


def test_a_gzip_with_a_bad_crc_still_gives_all_its_text(plain):
    packed = bytearray(gzip.compress(SGLANG.read_bytes()))
    packed[-6] ^= 0xFF  # the trailer's CRC-32
    log = read_log(io.BytesIO(bytes(packed)))
    assert _diagnosis(log) == plain["sglang"][1]
    assert "CRC-32" in log.read_notes[0]


def test_a_gzip_cut_in_the_middle_diagnoses_what_came_before(tmp_path):
    data = SGLANG.read_bytes()
    packed = gzip.compress(data)
    log = read_log(io.BytesIO(packed[: len(packed) // 2]))
    assert 0 < log.lines < data.count(b"\n")
    report = diagnose(log, replay=False)
    assert report.status == "incomplete"
    assert report.notes[0].startswith("the gzip data breaks off after ")
    corrupt = bytearray(packed)
    corrupt[len(packed) // 2 : len(packed) // 2 + 16] = b"\xff" * 16
    log = read_log(io.BytesIO(bytes(corrupt)))
    assert 0 < log.lines < data.count(b"\n")
    assert "while decompressing data" in log.read_notes[0]


@pytest.mark.parametrize(
    "data",
    [
        # mtime=0: the header's time stamp would differ between pytest-xdist's workers
        gzip.compress(b"x" * 100_000, mtime=0)[:20],
        b"\x1f\x8b\x08\x00" + b"\xff" * 64,
        b"\xfd7zXZ\x00" + b"\0" * 40,
    ],
    ids=["gzip-cut-in-its-header", "gzip-garbage", "xz-zeros"],
)
def test_a_compressed_log_with_nothing_readable_is_one_line(tmp_path, capsys, data):
    path = tmp_path / "engine.log.gz"
    path.write_bytes(data)
    code, out, err = run(capsys, "doctor", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"servefit: error: cannot read {path} as ") and err.count("\n") == 1
    with pytest.raises(ServefitError):
        read_log(io.BytesIO(data))


def test_plain_text_is_never_taken_for_a_compressed_or_utf16_log():
    """Magic bytes are tested whole: text that starts like one of them reads as text."""
    for head in (b"BZh9 is not a bzip2 header\n", b"]\0\0\0 not lzma\n", b"\x1f not gzip\n"):
        text = logfile.open_log(io.BytesIO(head + SGLANG.read_bytes()))
        assert text.read(1 << 20).startswith(head) and text.shape == []
    zeros = logfile.open_log(io.BytesIO(b"\0" * 10_000))  # a sparse file: NULs on both sides
    assert zeros.read(1 << 20) == b"\0" * 10_000 and zeros.shape == []


# ------------------------------------------------------------------------------ servefit logs


def test_servefit_logs_prints_a_compressed_or_bare_cr_log_as_its_lines(tmp_path):
    from servefit.launch import logview

    data = _lf_only(VLLM.read_bytes())
    want = data.decode().split("\n")[:-1]
    for shaped in (gzip.compress(data), data.replace(b"\n", b"\r")):
        path = tmp_path / "engine.log"
        path.write_bytes(shaped)
        printed: list[str] = []
        logview.show(None, path, _NoRedaction(), printed.append)  # type: ignore[arg-type]
        assert printed == want
        printed.clear()
        logview.show(None, path, _NoRedaction(), printed.append, lines=5)  # type: ignore[arg-type]
        assert printed == want[-5:]


def test_servefit_logs_cuts_an_over_long_line_at_a_space_and_holds_no_more_of_it():
    cutter = logfile.LineCutter()
    word = b"sk-" + b"k" * 40  # a key that must not be printed in part
    line = (b"a " + word + b" ") * (logfile.MAX_LINE // len(word))
    out = cutter.feed(line[: logfile.MAX_LINE + 10])
    assert out == [] and len(cutter.rest) == logfile.MAX_LINE  # held: at most MAX_LINE bytes
    out = cutter.feed(line[logfile.MAX_LINE + 10 :] + b"\nnext\n")
    head, mark = out[0].rsplit(" [", 1)
    assert mark == f"line cut at {logfile.MAX_LINE:,} bytes]" and out[1:] == ["next"]
    assert all(w in ("a", word.decode()) for w in head.split())  # no word printed in part


class _NoRedaction:
    def text(self, line: str) -> str:
        return line
