"""A log as UTF-8 bytes, whatever shape it came in: the one way servefit opens a log to read it
(`servefit doctor`, the diagnosis of a failed `servefit launch`, `servefit logs`).

* Compressed: gzip (logrotate's `engine.log.1.gz`), xz and legacy lzma, bzip2, zstd; told by the
  first bytes, never by the name, and decompressed as it is read. zstd needs a zstd module
  (Python 3.14's `compression.zstd`, `backports.zstd` or `zstandard`); without one the log is
  refused in one line that names the package. Concatenated members or streams are read in turn.
* Text: UTF-8 with or without a byte-order mark; UTF-16 LE or BE with its mark (PowerShell's `>`
  writes UTF-16 LE), or without one, told by where its NUL bytes fall; re-encoded to UTF-8.
* Line ends: LF and CRLF as they are; a file whose first block has CRs but no LF (old Mac line
  ends) has every CR turned into an LF. A lone CR inside LF lines (a progress bar redrawn) is
  left for the line reader (reader.LineSource), which ends a line there for the rules but keeps
  counting lines by LF, the numbers an editor or `grep -n` shows.
* Standard input ("-" or /dev/stdin) is read once, front to back, never seeked.

Memory is one block, whatever the input. A regular uncompressed file is read to its end, as
before; a stream whose length is not a file's (decompressed text, standard input) is read up to
MAX_STREAM bytes and no further, with a note, so a decompression bomb costs a bounded time and
no disk. A compressed stream that is cut or corrupt ends where it breaks: what came before is
read, and a note says why it stopped; when nothing came before, it is a one-line error.
"""

from __future__ import annotations

import bz2
import codecs
import importlib
import lzma
import sys
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from servefit.errors import ServefitError

MAX_LINE = 64 * 1024  # bytes of one line that are read; the rest of a longer line is dropped
MAX_STREAM = 16 << 30  # bytes of decompressed text or of standard input that are read
BLOCK = 1 << 16  # compressed bytes handed to a decompressor at a time
_SAMPLE = 4096  # bytes the encoding is told from
STDIN_NAMES = ("-", "/dev/stdin")


class Decompressor(Protocol):
    """What bz2.BZ2Decompressor, lzma.LZMADecompressor and zstd's ZstdDecompressor share."""

    eof: bool
    needs_input: bool
    unused_data: bytes

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


class _Gzip:
    """One gzip member (RFC 1952) with the API of the others: the header read here, the deflate
    data inflated raw, the trailer's CRC-32 and length checked here, after the text is given
    out, so a bad trailer costs none of the text (zlib's own gzip mode raises in the call that
    reaches it, and that call's text is lost)."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(-zlib.MAX_WBITS)
        self._buf = b""  # header or trailer bytes not yet complete
        self._state = "header"
        self._crc = self._size = 0
        self.eof = False
        self.unused_data = b""
        self._broken: zlib.error | None = None  # raised in the call after the text before it

    def _inflate(self, data: bytes, max_length: int) -> bytes:
        """Inflate; on corrupt data, the text before the corrupt spot (found again from a copy
        of the decoder, a few bytes of input at a time), the error kept for the next call."""
        saved = self._z.copy()
        try:
            return self._z.decompress(data, max_length)
        except zlib.error as exc:
            self._broken, self._state = exc, "trailer"
        self._z, parts = saved, []
        try:
            for i in range(0, len(data), 64):
                parts.append(self._z.decompress(data[i : i + 64]))
        except zlib.error:
            pass
        return b"".join(parts)[: max_length or None]

    @property
    def needs_input(self) -> bool:
        if self._broken is not None:
            return False
        if self._state == "body":
            return not self._z.unconsumed_tail
        return self._state == "header" or len(self._buf) < 8

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._state == "header":
            self._buf += data
            start = _gzip_header_end(self._buf)
            if start is None:
                return b""
            data, self._buf, self._state = self._buf[start:], b"", "body"
        if self._state == "body":
            out = self._inflate(self._z.unconsumed_tail + data, max(max_length, 0))
            self._crc, self._size = zlib.crc32(out, self._crc), self._size + len(out)
            if self._z.eof:  # the trailer is checked in the next call: this text goes out
                self._buf, self._state = self._z.unused_data, "trailer"
            return out
        if self._broken is not None:
            raise self._broken
        self._buf += data
        if len(self._buf) >= 8:
            crc = int.from_bytes(self._buf[:4], "little")
            size = int.from_bytes(self._buf[4:8], "little")
            if (crc, size) != (self._crc, self._size & 0xFFFFFFFF):
                raise OSError("its CRC-32 or length check fails")
            self.eof, self.unused_data = True, self._buf[8:]
        return b""


def _gzip_header_end(buf: bytes) -> int | None:
    """Where a gzip member's header ends (None: not all of it is in `buf`)."""
    if len(buf) < 10:
        return None
    if buf[2] != 8:
        raise OSError("not deflate-compressed")
    flags, pos = buf[3], 10
    if flags & 4:  # FEXTRA: a length, then that many bytes
        if len(buf) < pos + 2:
            return None
        pos += 2 + int.from_bytes(buf[pos : pos + 2], "little")
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & bit:
            end = buf.find(b"\0", pos)
            if end < 0:
                return None
            pos = end + 1
    if flags & 2:  # FHCRC
        pos += 2
    return pos if len(buf) >= pos else None


class _Zstandard:
    """The `zstandard` package's decoder with the API of the others. Its decompress() has no
    output limit, so input goes in small pieces: a zstd block expands at most 32,768-fold
    (4 bytes of RLE for 128 KiB), so a piece of PIECE bytes yields at most 4 MiB."""

    PIECE = 128

    def __init__(self, module: Any) -> None:
        self._d = module.ZstdDecompressor().decompressobj()
        self._pending, self._at = b"", 0
        self.unused_data = b""

    @property
    def eof(self) -> bool:
        return bool(getattr(self._d, "eof", False))

    @property
    def needs_input(self) -> bool:
        return self._at >= len(self._pending)

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if data:
            self._pending, self._at = self._pending[self._at :] + data, 0
        out: list[bytes] = []
        size = 0
        while (
            self._at < len(self._pending) and not self.eof and (max_length < 0 or size < max_length)
        ):
            got = self._d.decompress(self._pending[self._at : self._at + self.PIECE])
            self._at += self.PIECE
            out.append(got)
            size += len(got)
        if self.eof:
            self.unused_data = self._d.unused_data + self._pending[self._at :]
            self._pending, self._at = b"", 0
        return b"".join(out)


def _zstd_factory() -> Factory | None:
    """A zstd decoder of the modules this Python has, or None."""
    global _CORRUPT
    for name in ("compression.zstd", "backports.zstd"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        _CORRUPT = (*_CORRUPT, module.ZstdError)
        return module.ZstdDecompressor  # type: ignore[no-any-return]
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        return None
    _CORRUPT = (*_CORRUPT, zstandard.ZstdError)
    return lambda: _Zstandard(zstandard)  # type: ignore[return-value]


def _is_bzip2(head: bytes) -> bool:
    # "BZh", the block size digit, then a block's or the end's magic: plain text never is
    return (
        head[:3] == b"BZh"
        and head[3:4] in [b"%d" % i for i in range(1, 10)]
        and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90")
    )


def _is_lzma_alone(head: bytes) -> bool:
    # the legacy .lzma header: properties 0x5D (lc=3 lp=0 pb=2, what every tool writes), a
    # dictionary size of 2^n or 2^n + 2^(n-1) bytes (4 KiB .. 1.5 GiB), then the text's length:
    # unknown (all ones) or below 2^48. Text that starts with "]" has none of these.
    if len(head) < 13 or head[0] != 0x5D:
        return False
    dict_size, length = int.from_bytes(head[1:5], "little"), int.from_bytes(head[5:13], "little")
    sizes = {1 << n for n in range(12, 31)} | {3 << n for n in range(11, 29)}
    return dict_size in sizes and (length == (1 << 64) - 1 or length < 1 << 48)


Factory = Callable[[], Decompressor]


def _xz() -> Decompressor:
    return lzma.LZMADecompressor(lzma.FORMAT_XZ)


def _lzma_alone() -> Decompressor:
    return lzma.LZMADecompressor(lzma.FORMAT_ALONE)


# (name, test of the first bytes, the decoder factory: None where this Python has no module)
_FORMATS: tuple[tuple[str, Callable[[bytes], bool], Callable[[], Factory | None]], ...] = (
    ("gzip", lambda h: h[:2] == b"\x1f\x8b", lambda: _Gzip),
    ("xz", lambda h: h[:6] == b"\xfd7zXZ\x00", lambda: _xz),
    ("lzma", _is_lzma_alone, lambda: _lzma_alone),
    ("bzip2", _is_bzip2, lambda: bz2.BZ2Decompressor),
    # looked up when a zstd log comes, not at import: a module installed later is found
    ("zstd", lambda h: h[:4] == b"\x28\xb5\x2f\xfd", lambda: _zstd_factory()),
)
# what decoders raise on data that is not what their format says (a zstd module's own error
# class joins when the module is loaded)
_CORRUPT: tuple[type[BaseException], ...] = (EOFError, OSError, zlib.error, lzma.LZMAError)


class _Inflate:
    """The decompressed bytes of `raw`: read(n) gives at most n, b"" at the end; a member that
    ends is followed by the next one when the data goes on with the format's magic. Input goes
    to the decoder PIECE bytes at a time: a decoder that raises loses the text of that call,
    so the text lost before a corrupt spot stays small."""

    PIECE = 8192

    def __init__(self, raw: IO[bytes], head: bytes, fmt: str, new: Factory):
        self.raw, self.new = raw, new
        self.test = next(t for name, t, _ in _FORMATS if name == fmt)
        self.d = new()
        self.pending = head  # compressed bytes read but not yet given to the decoder
        self.done = False

    def read(self, n: int) -> bytes:
        while not self.done:
            if self.d.eof and not self._next_member():
                break
            data = b""
            if self.d.needs_input:
                if not self.pending:
                    self.pending = self.raw.read(BLOCK)
                    if not self.pending:
                        raise EOFError("cut short before its end marker")
                data, self.pending = self.pending[: self.PIECE], self.pending[self.PIECE :]
            out = self.d.decompress(data, n)
            if out:
                return out
        self.done = True
        return b""

    def _next_member(self) -> bool:
        """A decoder for the next member (gzip) or stream (xz, bzip2, zstd), if one follows."""
        rest = self.d.unused_data + self.pending or self.raw.read(BLOCK)
        while 0 < len(rest) < 16 and (more := self.raw.read(BLOCK)):
            rest += more
        if not rest or not self.test(rest):
            return False  # the end, or trailing bytes that are no member (padding): not read
        self.d, self.pending = self.new(), rest
        return True


def _read_full(read: Callable[[int], bytes], n: int) -> bytes:
    """Up to n bytes, fewer only at the end (a pipe or a decoder may give less per call)."""
    parts, size = [], 0
    while size < n and (got := read(n - size)):
        parts.append(got)
        size += len(got)
    return b"".join(parts)


class LogText:
    """The log's text as UTF-8 bytes: `read(n)` like a binary file, `notes` on how it was read
    (a guess, a cut), `shape` what was undone to get it ("gzip", "UTF-16 LE", ...), and
    `raw_pos`, where reading stands in the file when its bytes are passed on as they are (for
    following a log as it grows)."""

    def __init__(self, raw: IO[bytes], name: str, *, bounded: bool, owned: bool):
        self.name = name
        self.notes: list[str] = []
        self.shape: list[str] = []
        self._raw, self._owned = raw, owned
        self._src: Callable[[int], bytes] = raw.read
        self._limit = None if bounded else MAX_STREAM  # bytes the source may give
        self._given = 0
        self._compressed = False
        self._decode: Callable[[bytes, bool], bytes] | None = None
        self._cr_only = False
        self._held = b""  # in CR-only mode, a CR at the end of a block: is an LF next?
        self._eof = False
        self._first = True
        try:
            head = _read_full(raw.read, 16)
            for fmt, test, factory in _FORMATS:
                if test(head):
                    self._inflate(fmt, head, factory())
                    break
            else:
                self._unread(head)
        except BaseException:
            self.close()
            raise

    # -- opening
    def _inflate(self, fmt: str, head: bytes, new: Factory | None) -> None:
        if new is None:  # only zstd can be missing
            raise ServefitError(
                f"{self.name} is zstd-compressed and this Python has no zstd module: "
                "pip install zstandard (or decompress it first: zstd -d)"
            )
        self.shape.append(fmt)
        self._compressed = True
        self._src = _Inflate(self._raw, head, fmt, new).read
        self._limit = MAX_STREAM

    def _unread(self, head: bytes) -> None:
        """Give back the bytes read to tell the format: seek a file, prefix a pipe."""
        try:
            if self._raw.seekable():
                self._raw.seek(-len(head), 1)
                return
        except (OSError, ValueError):
            pass
        rest, pending = self._raw.read, [head]

        def read(n: int) -> bytes:
            if not pending:
                return rest(n)
            first = pending.pop()
            return first + rest(n - len(first)) if n > len(first) else first

        self._src = read

    @property
    def raw_pos(self) -> int | None:
        """Bytes of the file read so far, when the text is the file's own bytes (no
        decompression, re-encoding or CR translation); else None."""
        if self._compressed or self._decode is not None or self._cr_only:
            return None
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return None

    # -- reading
    def read(self, n: int = -1) -> bytes:
        n = n if n > 0 else 1 << 20
        while not self._eof:
            if self._first:
                self._first = False
                data = self._detect(self._take(max(n, _SAMPLE), full=True))
            else:
                data = self._take(n)
                if self._decode is not None:
                    data = self._decode(data, self._eof)
            if self._cr_only:
                data = self._cr_lines(data)
            if data:
                return data
        return self._cr_lines(b"") if self._held else b""

    def _take(self, n: int, full: bool = False) -> bytes:
        """Up to n bytes from the source (n unless it ends, with `full`), within the limit."""
        if self._limit is not None:
            if self._given >= self._limit:
                self._eof = True
                if self._pieces(1, False):  # more than the limit, not exactly it
                    self.notes.append(self._over_limit())
                return b""
            n = min(n, self._limit - self._given)
        data = self._pieces(n, full)
        self._given += len(data)
        self._eof = self._eof or not data
        return data

    def _pieces(self, n: int, full: bool) -> bytes:
        """What the source gives for n bytes; a compressed stream that breaks ends here, with
        what it gave before and a note (a one-line error when it gave nothing at all)."""
        if not self._compressed:  # a file's own read errors are the caller's (OSError)
            return _read_full(self._src, n) if full else self._src(n)
        parts: list[bytes] = []
        size = 0
        try:
            while size < n and (got := self._src(n - size)):
                parts.append(got)
                size += len(got)
                if not full:
                    break
        except _CORRUPT as exc:
            self._eof = True
            why, fmt = str(exc) or type(exc).__name__, self.shape[0]
            if not self._given and not size:
                raise ServefitError(f"cannot read {self.name} as {fmt}: {why}") from None
            self.notes.append(
                f"the {fmt} data breaks off after {self._given + size:,} bytes of text ({why}): "
                "the text before it was read"
            )
        return b"".join(parts)

    def _over_limit(self) -> str:
        what = "its decompressed text" if self._compressed else "standard input"
        return (
            f"only the first {MAX_STREAM:,} bytes of {what} were read: servefit reads no more "
            "of a stream (a log this long, or a decompression bomb)"
        )

    def _detect(self, block: bytes) -> bytes:
        """The first block as UTF-8: its encoding told, its byte-order mark dropped, its line
        ends looked at."""
        codec, skip = _encoding(block)
        if skip and codec == "utf-8":
            self.shape.append("UTF-8 BOM")
        elif codec != "utf-8":
            label = codec.upper().replace("UTF-16-", "UTF-16 ")
            self.shape.append(label)
            if not skip:
                self.notes.append(
                    f"read as {label}: it has no byte-order mark, its NUL bytes say so"
                )
            decoder = codecs.getincrementaldecoder(codec)("replace")
            self._decode = lambda b, final: decoder.decode(b, final).encode("utf-8")
        block = block[skip:]
        if self._decode is not None:
            block = self._decode(block, self._eof)
        if b"\r" in block and b"\n" not in block:
            self._cr_only = True
            self.shape.append("CR line ends")
        return block

    def _cr_lines(self, data: bytes) -> bytes:
        """Old Mac line ends: every CR (and CRLF) becomes an LF; a CR at the end of a block
        waits, in case the next block starts with its LF."""
        data, self._held = self._held + data, b""
        if data.endswith(b"\r") and not self._eof:
            data, self._held = data[:-1], b"\r"
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def close(self) -> None:
        if self._owned:
            self._raw.close()

    def __enter__(self) -> LogText:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _encoding(block: bytes) -> tuple[str, int]:
    """(codec, bytes of byte-order mark) of a log's first bytes."""
    if block.startswith(codecs.BOM_UTF8):
        return "utf-8", 3
    if block.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le", 2
    if block.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be", 2
    sample = block[: _SAMPLE & ~1]
    pairs = len(sample) // 2
    if pairs >= 8:
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        # ASCII text in UTF-16 has a NUL in every pair, on one side: LE after, BE before. A
        # run of NULs (a sparse file, padding) has them on both sides and is no UTF-16.
        if odd >= 0.3 * pairs and even <= 0.02 * pairs:
            return "utf-16-le", 0
        if even >= 0.3 * pairs and odd <= 0.02 * pairs:
            return "utf-16-be", 0
    return "utf-8", 0


def is_stdin(source: object) -> bool:
    return isinstance(source, (str, Path)) and str(source) in STDIN_NAMES


def open_log(source: str | Path | IO[bytes]) -> LogText:
    """The log's text: a path, "-" or /dev/stdin (standard input), or a binary file object."""
    if is_stdin(source):
        stdin = sys.stdin
        if stdin is None or stdin.isatty():
            raise ServefitError(
                "the log is standard input, but nothing is piped into it: "
                "servefit doctor - < LOG, or ... | servefit doctor -"
            )
        return LogText(stdin.buffer, "standard input", bounded=False, owned=False)
    if isinstance(source, (str, Path)):
        return LogText(open(source, "rb"), str(source), bounded=True, owned=True)  # noqa: SIM115
    return LogText(source, "<stream>", bounded=False, owned=False)


# ---------------------------------------------------------------------------------------------
# Lines to print (servefit logs)
# ---------------------------------------------------------------------------------------------


class LineCutter:
    """Whole lines out of blocks of bytes, for printing. The unfinished last line is held in
    `rest`, at most MAX_LINE bytes of it: a longer line keeps its head and drops what follows
    up to its end (`rest` at MAX_LINE bytes means inside such a line), so memory stays bounded
    and no line is printed in two pieces (the redactor sees each secret whole)."""

    def __init__(self, rest: bytes = b"") -> None:
        self.rest = rest

    def feed(self, data: bytes) -> list[str]:
        out: list[str] = []
        if len(self.rest) >= MAX_LINE:
            cut = data.find(b"\n")
            if cut < 0:
                return out
            out.append(cut_line(self.rest))
            self.rest, data = b"", data[cut + 1 :]
        buf = self.rest + data if self.rest else data
        end = buf.rfind(b"\n")
        if end >= 0:
            out += [cut_line(ln) for ln in buf[:end].split(b"\n")]
            buf = buf[end + 1 :]
        self.rest = buf[:MAX_LINE]
        return out

    def flush(self) -> list[str]:
        """The unfinished last line, when the input has ended."""
        rest, self.rest = self.rest, b""
        return [cut_line(rest)] if rest else []


def cut_line(raw: bytes) -> str:
    """A line as text; one over MAX_LINE bytes ends at the last space before MAX_LINE, so that
    no word is printed in part (a secret cut in two would not be recognised), and says so."""
    if len(raw) < MAX_LINE:
        return raw.decode("utf-8", "replace")
    head = raw[:MAX_LINE]
    space = max(head.rfind(b" "), head.rfind(b"\t"))
    return head[: max(space, 0)].decode("utf-8", "replace") + f" [line cut at {MAX_LINE:,} bytes]"


def last_lines(text: LogText, n: int, cutter: LineCutter) -> list[str]:
    """The last n whole lines of `text` (the unfinished one stays in `cutter.rest`)."""
    kept: deque[str] = deque(maxlen=n)
    for block in iter(lambda: text.read(1 << 20), b""):
        kept.extend(cutter.feed(block))
    return list(kept)


def lines_of(text: LogText, cutter: LineCutter) -> Iterator[str]:
    """Every whole line of `text`, in order (the unfinished one stays in `cutter.rest`)."""
    for block in iter(lambda: text.read(1 << 20), b""):
        yield from cutter.feed(block)
