"""Stream a log, line by line, in bounded memory, and turn the lines rules know into events.

* Input: a path, "-" (stdin), a binary file object, or any iterable of lines (str or bytes).
  Paths, stdin and file objects are opened by doctor/logfile.py: compressed, UTF-16 and
  bare-CR logs come out of it as UTF-8 text with LF line ends.
* A line longer than MAX_LINE bytes is cut there (the rest is skipped, never held), so one
  giant line cannot blow the memory up; nothing but the current line is kept.
* A lone CR (a progress bar redrawn with `\r` and no `\n`) ends a line for the rules, which
  read each piece on its own; line numbers still count LF line ends only (what an editor or
  `grep -n` shows), so the pieces of one line share its number, and a key that comes again in
  a later piece of the same line (the same bar redrawn) is read once.
* A single pre-filter regex (every rule's literal key, plus Python's exception-line shape) is
  searched per line; only lines it hits are decoded, stripped of their prefix and matched.
* Prefixes understood (the engine adds them; doctor keeps the rank and the timestamp):
  SGLang  "[2026-02-01 00:05:02 TP0] ", "[... DP0 PP1 TP3 EP3] ", "[...ms] "
  vLLM    "(EngineCore_DP0 pid=123) INFO 06-12 10:00:00 [gpu_worker.py:123] ",
          "(VllmWorker TP1 pid=9) ", "(Worker_TP0 pid=26347) ", V0 "INFO 02-11 07:40:45 model_runner.py:1115] "
  docker compose / journald "2026-05-01 22:44:30.254 | ", ANSI colour codes.
* Every line kept is redacted first (servefit.redact, every engine's secret flags): SGLang logs
  its server arguments with the key (`server_args=ServerArgs(... api_key='...')`), vLLM its
  non-default ones (`'api_key': [...]`); the doctor quotes, compares and re-plans the masked
  values (`***` + fingerprint: the same key gives the same mark) and never shows a secret.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from servefit.doctor import sglang, vllm
from servefit.doctor.logfile import MAX_LINE, LogText, open_log
from servefit.doctor.rules import EXCEPTION_LINE, GENERIC_RULES, BadLine, Event, EventKind, Rule
from servefit.engines.secretflags import redactor
from servefit.trie import trie_regex

__all__ = ["MAX_LINE", "Hit", "LineSource", "LogLine", "match", "parse_prefix", "scan"]

ALL_RULES: tuple[Rule, ...] = sglang.RULES + vllm.RULES + GENERIC_RULES
_KEYS: dict[str, tuple[Rule, ...]] = {}
for _r in ALL_RULES:
    for _k in (_r.key,) if isinstance(_r.key, str) else _r.key:
        _KEYS[_k] = _KEYS.get(_k, ()) + (_r,)
_ORDER = {id(r): i for i, r in enumerate(ALL_RULES)}


# Python exception lines ("RuntimeError: ...") carry no literal key: these words join the filter
# and doctor.rules.EXCEPTION_LINE checks the shape.
# launch commands written into the file (shell echo, excerpts): "python -m sglang.launch_server",
# "sglang serve", "vllm serve", "python -m vllm.entrypoints.openai.api_server"
_COMMAND_WORDS = ("-m sglang.", "glang serve", "vllm serve", "-m vllm.entrypoints")
FILTER_WORDS = (*_KEYS, "Error: ", "Exception: ", "Interrupt: ", *_COMMAND_WORDS)
_FILTER_TEXT = trie_regex(FILTER_WORDS)
_FILTER_STR = re.compile(_FILTER_TEXT)
_COMMAND = re.compile("|".join(re.escape(w) for w in _COMMAND_WORDS))
_FILTER_BYTES = re.compile(_FILTER_TEXT.encode())

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SGL_PREFIX = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP|CP)\d+)*)\]"
)
_VLLM_PROC = re.compile(
    r"\((?P<proc>[A-Za-z][\w]*(?: [A-Z]+\d+)?)(?: pid=(?P<pid>\d+))?(?:, ip=[\w.:]+)?\)"
)
_VLLM_LEVEL = re.compile(
    r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)"
)
SGL_PREFIX = _SGL_PREFIX
_CONTAINER_TS = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:\.\d+)?\s*\|")
_RANK_TAG = re.compile(r"(?:DP|PP|PCP|TP|DCP|EP)\d+")


@dataclass(slots=True)
class LogLine:
    no: int  # 1-based
    text: str  # the line without ANSI codes, cut at MAX_LINE
    rank: str  # "TP0", "DP0 TP1", "" when no rank is printed
    ts: str | None  # timestamp as printed ("2026-02-01 00:05:02" or "06-12 10:00:00")
    proc: str | None  # vLLM process tag ("EngineCore_DP0", "APIServer", "Worker_TP1")


@dataclass(slots=True)
class Hit:
    line: LogLine
    event: Event
    rule: Rule | None  # None for exception lines and launch commands


class LineSource:
    """The input in chunks; yields only the lines the pre-filter hits, with their line numbers.

    The filter runs over whole chunks (1 MiB from files, or the items of an iterable, which may
    hold one line or many), so lines nobody asked about are never turned into Python objects:
    memory is one chunk plus the unfinished last line, capped at MAX_LINE.
    """

    CHUNK = 1 << 20

    def __init__(
        self,
        source: str | Path | IO[bytes] | Iterable[str] | Iterable[bytes],
        fast: Callable[[int, bytes | str, bytes | str, int], bool] | None = None,
        bulk: Callable[[bytes | str, int, int], int] | None = None,
        fast_keys: frozenset[bytes | str] = frozenset(),
    ):
        self.source = source
        # bulk(chunk, start of a hit line, its number) reads the lines from there up to the
        # returned position itself (start: none of them)
        self.bulk = bulk
        self.fast_keys = fast_keys  # the keys of the lines fast and bulk read
        # fast(line number, line, its only key, where the key is) reads a line itself and
        # returns True, or
        # returns False to have it yielded (doctor/serving.py)
        self.fast = fast
        self.lines = 0
        self.ends_mid_line = False
        self.skipped = 0  # recognised lines whose values could not be read
        self.first_skipped: int | None = None
        self.notes: list[str] = []  # how the input was read (logfile.LogText.notes)
        # the line whose CR-separated pieces are being read, and the keys read in them
        self._redrawn: tuple[int, set[str | bytes]] = (0, set())

    def skip(self, no: int) -> None:
        """Count a line that is skipped because it could not be read (torn, corrupted)."""
        self.skipped += 1
        if self.first_skipped is None:
            self.first_skipped = no

    def _chunks(self) -> Iterator[str | bytes]:
        src = self.source
        if isinstance(src, (str, Path, io.RawIOBase, io.BufferedIOBase)) or hasattr(src, "read"):
            text = src if isinstance(src, LogText) else open_log(src)  # type: ignore[arg-type]
            self.notes = text.notes  # filled while it is read
            with text:
                yield from iter(lambda: text.read(self.CHUNK), b"")
            return
        for item in src:  # an iterable of lines, or of blocks of whole lines
            if item and not item.endswith(b"\n" if isinstance(item, bytes) else "\n"):  # type: ignore[arg-type]
                item = item + (b"\n" if isinstance(item, bytes) else "\n")  # type: ignore[operator]
            yield item

    def hits(self) -> Iterator[tuple[int, str]]:
        carry: str | bytes | None = None
        skipping = False  # inside an over-long line: its head is in `carry`, the rest is dropped
        for chunk in self._chunks():
            if not chunk:
                continue
            nl: str | bytes = b"\n" if isinstance(chunk, bytes) else "\n"
            if skipping:
                # the over-long piece ends at the line's end or at a CR (its pieces go on)
                cut = _first(chunk.find(nl), chunk.find(_CR[nl]))  # type: ignore[arg-type]
                if cut < 0:
                    continue
                yield from self._scan(carry + chunk[cut : cut + 1], nl)  # type: ignore[operator]
                chunk, carry, skipping = chunk[cut + 1 :], None, False
            buf = chunk if carry is None else carry + chunk  # type: ignore[operator]
            end = buf.rfind(nl)  # type: ignore[arg-type]
            if end < 0:
                carry = buf
            else:
                yield from self._scan(buf[: end + 1], nl)
                carry = buf[end + 1 :]
            if len(carry) > MAX_LINE:
                # the pieces before the last CR of an unfinished line are whole: read them
                # (a progress bar redrawn for megabytes, then the error), keep the last one
                cr = carry.rfind(_CR[nl], 0, len(carry) - 1)  # type: ignore[arg-type]
                if cr >= 0:
                    yield from self._scan(carry[: cr + 1], nl)
                    carry = carry[cr + 1 :]
                if len(carry) > MAX_LINE:
                    carry, skipping = carry[:MAX_LINE], True
        if carry:
            self.ends_mid_line = True
            nl = b"\n" if isinstance(carry, bytes) else "\n"
            yield from self._scan(carry + nl, nl)  # type: ignore[operator]

    def _scan(self, body: str | bytes, nl: str | bytes) -> Iterator[tuple[int, str]]:
        """Hit lines of `body` (whole lines, ending with a newline)."""
        cr = _CR[nl]
        if cr in body and body.count(cr) != body.count(cr + nl):  # type: ignore[operator,arg-type]
            yield from self._scan_pieces(body, nl)  # a lone CR: pieces of lines
            return
        pattern = _FILTER_BYTES if isinstance(body, bytes) else _FILTER_STR
        base, counted_to, pos = self.lines, 0, 0
        while (m := pattern.search(body, pos)) is not None:  # type: ignore[arg-type]
            start = body.rfind(nl, 0, m.start()) + 1  # type: ignore[arg-type]
            stop = body.find(nl, m.end())  # type: ignore[arg-type]
            base += body.count(nl, counted_to, start)  # type: ignore[arg-type]
            counted_to = start
            key = m.group()
            serving = key in self.fast_keys
            if serving and self.bulk is not None:
                end = self.bulk(body, start, base + 1)
                if end > start:  # whole lines [start, end) read in one go
                    base += body.count(nl, start, end)  # type: ignore[arg-type]
                    counted_to = pos = end
                    continue
            pos = stop + 1  # a second key on this line is the same line
            line = body[start:stop]
            if (
                serving
                and self.fast is not None
                and pattern.search(body, m.end(), stop) is None  # type: ignore[arg-type]
                and self.fast(base + 1, line, key, m.start() - start)
            ):
                continue
            if isinstance(line, bytes):
                line = line[:MAX_LINE].decode("utf-8", "replace")
            yield base + 1, line[:MAX_LINE]
        self.lines += body.count(nl)  # type: ignore[arg-type]

    def _scan_pieces(self, body: str | bytes, nl: str | bytes) -> Iterator[tuple[int, str]]:
        """_scan for a body with lone CRs (it ends with an LF, or with a CR inside an unfinished
        line): a CR ends a piece that the rules read as a line, numbered as the LF line it is
        part of. A key read in a piece of a line is not read again in a later piece of that
        line: a progress bar redrawn a hundred times is one line, not a hundred. The serving
        fast path is not taken (it reads LF lines); the facts are the same without it."""
        cr = _CR[nl]
        pattern = _FILTER_BYTES if isinstance(body, bytes) else _FILTER_STR
        base, counted_to, pos = self.lines, 0, 0
        while (m := pattern.search(body, pos)) is not None:  # type: ignore[arg-type]
            start = max(body.rfind(nl, 0, m.start()), body.rfind(cr, 0, m.start())) + 1  # type: ignore[arg-type]
            stop = _first(body.find(nl, m.end()), body.find(cr, m.end()))  # type: ignore[arg-type]
            base += body.count(nl, counted_to, start)  # type: ignore[arg-type]
            counted_to, pos = start, stop + 1
            line_no, keys = self._redrawn
            if line_no != base + 1:
                line_no, keys = base + 1, set()
                self._redrawn = (line_no, keys)
            if m.group() in keys:
                continue
            keys.add(m.group())
            line = body[start:stop]
            if isinstance(line, bytes):
                line = line[:MAX_LINE].decode("utf-8", "replace")
            yield line_no, line[:MAX_LINE]
        self.lines += body.count(nl)  # type: ignore[arg-type]


_CR: dict[str | bytes, str | bytes] = {b"\n": b"\r", "\n": "\r"}


def _first(a: int, b: int) -> int:
    """The earlier of two find() results (-1: not found)."""
    if a < 0 or b < 0:
        return max(a, b)
    return min(a, b)


def scan(source: LineSource) -> Iterator[Hit]:
    """Events of the lines rules know, in file order, plus launch-command lines."""
    clean = redactor().text
    for no, raw in source.hits():
        text = raw.rstrip("\r\n")
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        text = clean(text)
        prefix = _SGL_PREFIX.match(text) if text.startswith("[") else None
        if prefix is not None:  # the usual SGLang line (parse_prefix's first case)
            line = LogLine(no, text[:MAX_LINE], prefix.group("ranks").strip(), prefix["ts"], None)
        else:
            line = parse_prefix(no, text)
        try:
            event, rule = match_cached(text, prefix)
        except BadLine:
            source.skip(no)
            continue
        if event is not None:
            yield Hit(line, event, rule)
        elif _COMMAND.search(text) and not _engine_message(text):
            yield Hit(line, {"kind": EventKind.COMMAND, "text": _without_prompt(text)}, None)


_PROMPT = re.compile(r"^(?:[$#>] )+")


def _without_prompt(text: str) -> str:
    """A pasted command without the shell prompt in front ("$ ", root's "# "): shlex would
    read "# vllm serve ..." as a comment, and the fix would be applied to a comment."""
    return _PROMPT.sub("", text.strip())


def _engine_message(text: str) -> bool:
    """A line the engine logged (vLLM's level + time, SGLang's [time rank] prefix): its words are
    the engine's, so a command they mention is not a launch command written into the file, e.g.
    vLLM 0.32's "Scale-out endpoints are disabled. Restart vllm serve with --enable-scale-out to
    enable them." (vllm/entrypoints/scale_out/factories.py:register_scale_out_api_routers, logged at every `vllm serve` start)."""
    head = text[:160]
    return bool(_VLLM_LEVEL.search(head) or _SGL_PREFIX.search(head))


# What match() found for a line's text after its SGLang prefix: a crash loop prints the same
# lines launch after launch, only the timestamps differ. (text -> (event, rule, the event's
# keys that hold lists), or BadLine)
_SEEN: dict[str, tuple[Event | None, Rule | None, tuple[str, ...]] | BadLine] = {}
_MAX_SEEN = 4096


def match_cached(text: str, prefix: re.Match[str] | None) -> tuple[Event | None, Rule | None]:
    """match(), remembered by the text after the SGLang prefix (`prefix`, the line's match of
    it): no rule reads the prefix (the anchored ones accept any bracketed prefix alike), and no
    event holds text from it."""
    key = text[prefix.end() :] if prefix is not None else text
    found = _SEEN.get(key)
    if found is None:
        try:
            event, rule = match(text)
            lists = tuple(k for k, v in event.items() if isinstance(v, list)) if event else ()
            found = (event, rule, lists)
        except BadLine as exc:
            found = exc
        if len(_SEEN) >= _MAX_SEEN:
            _SEEN.clear()
        _SEEN[key] = found
    if isinstance(found, BadLine):
        raise found
    event, rule, lists = found
    if event is None:
        return None, rule
    # a copy: handlers keep lists from events
    copy = dict(event)
    for k in lists:
        copy[k] = list(copy[k])
    return copy, rule


def match(text: str) -> tuple[Event | None, Rule | None]:
    """The first rule (in definition order) among those whose key occurs in `text`."""
    keys = {m.group(0) for m in _FILTER_STR.finditer(text)}
    candidates = sorted(
        {id(r): r for k in keys if k in _KEYS for r in _KEYS[k]}.values(),
        key=lambda r: _ORDER[id(r)],
    )
    for r in candidates:
        m = r.pattern.search(text)
        if m:
            event = r.event(m)
            if event["kind"] == EventKind.ERROR:  # one-line errors carry their details too
                for d in candidates:
                    dm = d.pattern.search(text) if d.kind == "error_detail" else None
                    if dm:
                        event.update({k: v for k, v in d.event(dm).items() if k != "kind"})
            return event, r
    m = EXCEPTION_LINE.match(text.strip())
    if m:
        return {"kind": EventKind.EXCEPTION, "exc": m.group("exc"), "text": text.strip()}, None
    return None, None


def parse_prefix(no: int, text: str) -> LogLine:
    rank, ts, proc = "", None, None
    if text.startswith("["):  # the usual SGLang line: anchored match, no scan
        s = _SGL_PREFIX.match(text)
        if s:
            return LogLine(
                no=no,
                text=text[:MAX_LINE],
                rank=s.group("ranks").strip(),
                ts=s.group("ts"),
                proc=None,
            )
    c = _CONTAINER_TS.match(text)
    if c:
        ts = c.group("ts").replace("T", " ")
    s = _SGL_PREFIX.search(text)
    if s:
        ts = ts or s.group("ts")
        rank = s.group("ranks").strip()
    p = _VLLM_PROC.search(text)
    if p and (s is None or p.start() < s.start()):
        proc = p.group("proc")
        tags = _RANK_TAG.findall(proc.replace(" ", "_"))
        rank = " ".join(tags) if tags else rank
        if not tags and "Worker" in proc and p.group("pid"):
            rank = f"pid {p.group('pid')}"
    v = _VLLM_LEVEL.search(text)
    if v and ts is None:
        ts = v.group("ts")
    return LogLine(no=no, text=text[:MAX_LINE], rank=rank, ts=ts, proc=proc)
