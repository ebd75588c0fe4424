"""The serving lines of a busy SGLang server, read at full speed.

Once a server is up, nearly every line it prints is a decode stats line, a prefill stats line
or an access line (managers/scheduler_metrics_mixin.py:log_decode_stats / log_prefill_stats,
uvicorn's access log): hundreds of thousands a day. The reader's general path
(doctor/reader.py:scan) turns each into an event dict, a Hit and a LogLine. This module reads
the few numbers a launch keeps straight from the bytes, with the rules' own patterns, and hands
them to the same accumulator methods (LaunchAcc.note, .decode, .prefill, .http):

* `ServingLines.region` takes a whole run of serving lines (up to the next line of any other
  kind) with one regex per kind: decode lines laid out like the run's first one, prefill and
  access lines as their rules read them;
* `ServingLines.__call__` takes one line at a time where a run does not qualify.

Any line either is not certain about (a second key on it, colour codes, bytes that are not
ASCII, a prefix it does not know, a value that does not read, a launch not yet serving) goes
the general way, so the facts are the same with or without this module:
tests/doctor/test_reader_robustness.py compares them on real and mutated logs.

Redaction (servefit.redact) is not run here: no text of these lines is kept, and none of its
patterns can cover the values read ("label: number", a lowercase label before the colon).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from servefit.doctor import reader, sglang
from servefit.doctor.accumulate import LaunchAcc
from servefit.doctor.rules import GENERIC_RULES, Event, EventKind, Rule
from servefit.frozen import frozen
from servefit.trie import trie_regex

# the largest number a rule accepts (doctor/rules.py:Rule.event)
_LIMIT = float(1 << 53)


def _rule(rules: tuple[Rule, ...], kind: EventKind) -> Rule:
    return next(r for r in rules if r.kind == kind)


_DECODE = _rule(sglang.RULES, EventKind.DECODE)
_PREFILL = _rule(sglang.RULES, EventKind.PREFILL)
_HTTP = _rule(GENERIC_RULES, EventKind.HTTP)

# sglang.DECODE_PARTS as (name, label, value pattern): str.find on the label, then the value,
# finds what each part's regex search finds (its first occurrence followed by a value)
_PART_RE = re.compile(r"(?P<label>(?:[^\\(]|\\.)+)\((?P<value>[^)]+)\)")
_PARTS = tuple(
    (name, re.sub(r"\\(.)", r"\1", m["label"]), re.compile(m["value"]))
    for name, pat in sglang.DECODE_PARTS
    if (m := _PART_RE.fullmatch(pat.pattern))
)
assert len(_PARTS) == len(sglang.DECODE_PARTS), "a decode part is not 'label(value)'"


def _number(text: str | bytes | None, as_float: bool) -> float | int | None:
    """A value as the rules read it, or None when the general path would refuse it."""
    if text is None:
        return None
    try:
        value: float | int = float(text) if as_float else int(text)
    except ValueError:
        return None
    return value if -_LIMIT <= value <= _LIMIT else None


# --------------------------------------------------------------------------------------------
# One line
# --------------------------------------------------------------------------------------------


def _decode(text: str, at: int) -> Event | None:
    """doctor/sglang.py:_decode's event for the decode line whose key is at `at`, or None."""
    m = _DECODE.pattern.match(text, at)
    if m is None:
        return None
    running = _number(m.group("running"), False)
    if running is None:
        return None
    ev: Event = {"running": running, "throughput": 0.0, "queue": 0}
    end = m.end()
    for name, label, value_re in _PARTS:
        i = text.find(label, end)
        while i >= 0:
            v = value_re.match(text, i + len(label))
            if v is not None:
                raw = v.group()
                value = _number(raw, "." in raw or name != "queue")
                if value is None:
                    return None
                ev[name] = value
                break
            i = text.find(label, i + 1)
    if "accept_len" in ev and "accept_rate" not in ev:
        return None  # the general path reads it and skips it
    return ev


def _groups(rule: Rule, text: str, at: int) -> Event | None:
    """A rule's numbers() event, or None."""
    m = rule.pattern.search(text)
    if m is None:
        return None
    ev: Event = {}
    for name, value in m.groupdict().items():
        if value is None:
            continue
        if name in rule.numeric:
            number = _number(value, False)
            if number is None:
                return None
            ev[name] = number
        else:
            ev[name] = value
    return ev


# filter key -> (kind, the engine its rule names, event reader, accumulator method)
_READERS: dict[bytes, tuple[EventKind, str | None, Callable[[str, int], Event | None], str]] = {
    b"Decode batch": (EventKind.DECODE, _DECODE.engine, _decode, "decode"),
    b"Prefill batch": (
        EventKind.PREFILL,
        _PREFILL.engine,
        lambda t, at: _groups(_PREFILL, t, at),
        "prefill",
    ),
    b'HTTP/1.1"': (EventKind.HTTP, _HTTP.engine, lambda t, at: _groups(_HTTP, t, at), "http"),
}

SERVING_KEYS: frozenset[bytes | str] = frozenset(_READERS)

# --------------------------------------------------------------------------------------------
# A run of lines
# --------------------------------------------------------------------------------------------

# every other key of the reader's filter: where a run of serving lines ends
_OTHER_WORDS = tuple(k.encode() for k in reader.FILTER_WORDS if k.encode() not in _READERS)
assert not any(b"\n" in w for w in _OTHER_WORDS), "a key spans lines"
_OTHER = re.compile(trie_regex([w.decode() for w in _OTHER_WORDS]).encode())
_SAMPLE = 1 << 16  # bytes of serving lines that choose _OtherKeys' marks
_RARE = 8  # a mark byte comes in fewer than one line in _RARE of the sample


class _OtherKeys:
    """Where the first line holding another key is: what `_OTHER.search` tells, found without
    running that regex over the serving lines. A regex of many alternatives stops at every
    byte that can start one (about 100 MB/s here); bytes.translate and bytes.find run at
    memory speed. Each key is given a mark, the byte of it that is rarest in a sample of the
    log's serving lines; the text is copied with every mark byte turned into NUL, and only
    the lines holding a NUL are searched with `_OTHER`. A key whose every byte is common in
    the sample ("-m sglang.") is looked for whole. Every line holding a key holds its mark
    or the whole key, so no line is missed; the sample only decides the speed."""

    def __init__(self, sample: bytes) -> None:
        count = {b: sample.count(bytes((b,))) for b in set(b"".join(_OTHER_WORDS))}
        rare = max(1, sample.count(b"\n") // _RARE)
        marks: set[int] = set()
        whole: list[bytes] = []
        for w in _OTHER_WORDS:
            mark = min(w, key=count.__getitem__)  # the first of the rarest, for a stable choice
            if count[mark] <= rare:
                marks.add(mark)
            else:
                whole.append(w)
        self.whole = tuple(whole)
        self.table = bytes(0 if b in marks else b for b in range(256))
        self._body: bytes | None = None
        self._marked = b""

    def search(self, body: bytes, start: int) -> int | None:
        """Where a key is in the first line from `start` (a line start) holding one, or None."""
        if body is not self._body:  # the reader calls again for each run of the same block
            self._body, self._marked = body, body.translate(self.table)
        # a key looked for whole is found as it is: no line after it needs looking at
        found = [at for at in (body.find(w, start) for w in self.whole) if at >= 0]
        limit = min(found, default=len(body))
        at = self._marked.find(b"\0", start, limit)
        while at >= 0:  # a line with a mark byte (or a NUL): does it hold a key?
            line = max(start, body.rfind(b"\n", 0, at) + 1)
            stop = body.find(b"\n", at)
            m = _OTHER.search(body, line, len(body) if stop < 0 else stop)
            if m is not None:
                return m.start()
            at = self._marked.find(b"\0", stop, limit) if stop >= 0 else -1
        return limit if found else None


_PREFIX = reader.SGL_PREFIX
# the prefix without its timestamp group (a run's last line gives its time): a row's first
# value is the ranks
_PREFIX_BYTES = _PREFIX.pattern.replace("(?P<ts>", "(?:").replace("(?P<ranks>", "(").encode()
# Whole lines, one regex for the three kinds: SGLang's prefix, then the message. Decode and
# prefill messages start right after the prefix ("[%(asctime)s%(prefix)s] %(message)s") and
# an access line's request is its first quote, so no line can hold another key before its
# own, and a decode line's layout fixes all of its text: a line with two keys matches fewer
# times than it has keys, and the run is left to the line-by-line path. The run is searched
# with a newline in front: the regex starts with a literal newline, found at memchr speed.
# Only the values read are captured: findall makes an object of every group of every row.
_START = rb"\n(?=[^\n]{0,%d}\n)" % reader.MAX_LINE + _PREFIX_BYTES + rb" (?:"
_PREFILL_BODY = (
    rb"Prefill batch(?: \[\d+\])?, #new-seq: (\d+), #new-token: (\d+)"
    rb"(?:[^\n]*?#running-req: (\d+), #queue-req: (\d+))?"
)
_HTTP_BODY = rb'[^\n"]*"(POST|GET) (/\S*) HTTP/1\.1" (\d{3})'
_NUMBER = re.compile(r"\d+\.\d+|\d+|True|False")
_MAX_LAYOUTS = 64
_MIN_RUN = 4096  # bytes: shorter runs are not worth the regexes
# decode values the launch keeps every one of, in order (LaunchAcc.decode's Stats); of the
# others it keeps the largest
_IN_ORDER = frozenset({"throughput", "accept_len", "accept_rate"})


@frozen
class _Layout:
    """The run regex for one decode layout (or none), and where its values are in a row."""

    regex: re.Pattern[bytes]
    decode: dict[str, int]  # value name -> row index
    prefill: int  # row index of new_seq (new_token, running, queue follow)
    http: int  # row index of the method (path, status follow)


def _decode_body(template: str) -> tuple[bytes, list[str]] | None:
    """A regex body for decode messages laid out like `template` (the same text between the
    numbers), capturing the values _decode reads, and their names in group order; None when
    it does not read."""
    m = _DECODE.pattern.match(template)
    if m is None:
        return None
    numbers = list(_NUMBER.finditer(template))
    starts = {n.start() for n in numbers}
    at = {m.start("running"): "running"}
    for name, label, _value in _PARTS:
        i = template.find(label, m.end())
        if i >= 0:
            if i + len(label) not in starts:
                return None  # its first occurrence has no value: leave it to _decode
            at[i + len(label)] = name
    if m.start("running") not in starts:
        return None
    body, end = "", 0
    for n in numbers:
        value = n.group()
        if value in ("True", "False"):
            piece = "True|False"
        else:
            piece = r"\d+\.\d+" if "." in value else r"\d+"
        body += re.escape(template[end : n.start()])
        body += f"({piece})" if n.start() in at else f"(?:{piece})"
        end = n.end()
    body += re.escape(template[end:])
    return body.encode() + rb"\r?(?=\n)", [at[i] for i in sorted(at)]


_LAYOUTS: dict[str | None, _Layout | None] = {}


def _layout(template: str | None) -> _Layout | None:
    """The run regex for decode messages like `template` (None: a run without decode lines)."""
    shape = None if template is None else _NUMBER.sub("#", template)
    if shape in _LAYOUTS:
        return _LAYOUTS[shape]
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.clear()
    found = None
    decode = (b"(?!)", []) if template is None else _decode_body(template)
    if decode is not None:
        body, names = decode
        regex = re.compile(_START + body + b"|" + _PREFILL_BODY + b"|" + _HTTP_BODY + b")")
        k = len(names)  # rows: the ranks, the decode values, prefill's 4, the access line's 3
        index = {name: 1 + i for i, name in enumerate(names)}
        found = _Layout(regex, index, 1 + k, 1 + k + 4)
        assert regex.groups == 1 + k + 4 + 3, "a group count went wrong"
    _LAYOUTS[shape] = found
    return found


def _column(
    rows: list[tuple[bytes, ...]], index: int, as_float: bool, in_order: bool = True
) -> list[Any] | None:
    """One value of every row, read as _number reads it (with `in_order` False, only the
    distinct ones: for a largest value); None when one does not read. Each distinct text
    is read once when most repeat (token usage, accept rates, queue lengths do)."""
    raw = list(map(itemgetter(index), rows))
    distinct = set(raw)
    read = float if as_float else int
    try:
        if in_order and 2 * len(distinct) > len(raw):
            values = checked = list(map(read, raw))
        else:
            table = dict(zip(distinct, map(read, distinct), strict=True))
            checked = list(table.values())
            values = list(map(table.__getitem__, raw)) if in_order else checked
    except ValueError:
        return None
    if checked and not (min(checked) >= -_LIMIT and max(checked) <= _LIMIT):
        return None
    return values


class ServingLines:
    """The fast paths, bound to the launch that is current while the log streams by."""

    def __init__(self, current: Callable[[], LaunchAcc]) -> None:
        self.current = current
        # a run that did not qualify is not looked at again, line after line
        self._body: bytes | str | None = None
        self._skip_to = 0
        self._keys: _OtherKeys | None = None

    def __call__(self, no: int, raw: bytes | str, key: bytes | str, at: int) -> bool:
        """Read one line and return True, or return False to leave it to scan()."""
        spec = _READERS.get(key) if isinstance(key, bytes) else None
        if spec is None or not isinstance(raw, bytes):
            return False
        acc = self.current()
        kind, engine, read, method = spec
        if acc.ready_line is None or (engine is not None and acc.engine != engine):
            return False
        if len(raw) > reader.MAX_LINE or b"\x1b" in raw or not raw.isascii():
            return False
        text = raw.decode("ascii").rstrip("\r\n")
        prefix = _PREFIX.match(text)
        if prefix is None:
            return False
        ev = read(text, at)
        if ev is None:
            return False
        acc.note(kind, no, prefix.group("ts"), prefix.group("ranks").strip(), engine)
        getattr(acc, method)(ev, no)
        return True

    def region(self, body: bytes | str, start: int, no: int) -> int:
        """Read the run of serving lines from `start` (a hit line, number `no`) to the next
        line of another kind, and return where it ends; `start` when it does not qualify."""
        acc = self.current()
        if body is self._body and start < self._skip_to:
            return start
        if (
            not isinstance(body, bytes)
            or acc.ready_line is None
            or acc.engine != "sglang"
            or acc.start_time is None
            or "first_request_line" not in acc.traffic
        ):
            return start
        if self._keys is None:  # the first run's lines choose the marks
            self._keys = _OtherKeys(body[start : start + _SAMPLE])
        other = self._keys.search(body, start)
        end = (body.rfind(b"\n", start, other) + 1) if other is not None else len(body)
        if end - start < _MIN_RUN:
            return start
        run = body[start:end]
        counts = [run.count(k) for k in _READERS]
        read = None
        if run.isascii() and b"\x1b" not in run:
            read = self._read(run, counts)
        if read is None:
            self._body, self._skip_to = body, end
            return start
        self._apply(acc, run, no, read)
        return end

    @staticmethod
    def _read(run: bytes, counts: list[int]) -> dict[str, Any] | None:
        """The rows and columns of each kind in `run`, or None when a line does not read."""
        n_decode, n_prefill, n_http = counts
        template = None
        if n_decode:
            i = run.find(b"Decode batch")
            template = run[i : run.find(b"\n", i)].decode("ascii").rstrip("\r")
        layout = _layout(template)
        if layout is None:
            return None
        rows = layout.regex.findall(b"\n" + run)
        if len(rows) != n_decode + n_prefill + n_http:
            return None
        # a row's groups of the other kinds are empty (b""); filter() keeps the rows whose
        # group is not
        decode = list(filter(itemgetter(layout.decode["running"]), rows)) if n_decode else []
        prefill = list(filter(itemgetter(layout.prefill), rows))
        http = list(filter(itemgetter(layout.http), rows))
        if (len(decode), len(prefill), len(http)) != (n_decode, n_prefill, n_http):
            return None
        out: dict[str, Any] = {"ranks": set(map(itemgetter(0), rows))}
        if decode:
            cols = {}
            for name, index in layout.decode.items():
                col = _column(decode, index, name not in ("running", "queue"), name in _IN_ORDER)
                if col is None:
                    return None
                cols[name] = col
            if "accept_len" in cols and "accept_rate" not in cols:
                return None
            out["decode"] = (decode, cols)
        if prefill:
            p = layout.prefill
            new_seq, new_token = _column(prefill, p, False), _column(prefill, p + 1, False, False)
            if new_seq is None or new_token is None:
                return None
            for index in (p + 2, p + 3):  # optional: checked as the rule checks them
                if any(v and _number(v, False) is None for v in set(map(itemgetter(index), prefill))):
                    return None
            out["prefill"] = (prefill, {"new_seq": new_seq})
        if http:
            h = layout.http
            out["http"] = Counter(map(itemgetter(h, h + 1, h + 2), http))
        return out

    @staticmethod
    def _apply(acc: LaunchAcc, run: bytes, no: int, read: dict[str, Any]) -> None:
        """What LaunchAcc.note and the kinds' methods do for each line, for the whole run."""
        last = max(run.rfind(k) for k in _READERS)
        line_start = run.rfind(b"\n", 0, last) + 1
        last_line = run[line_start : run.find(b"\n", last)].decode("ascii")
        kind = next(_READERS[k][0] for k in _READERS if run.startswith(k, last))
        prefix = _PREFIX.match(last_line)
        assert prefix is not None  # every line of the run matched a whole-line regex
        t = acc.traffic
        if "decode" in read:
            rows, cols = read["decode"]
            acc.kinds.add(EventKind.DECODE)
            t["decode_logs"] += len(rows)
            t["max_running"] = max(t.get("max_running", 0), max(cols["running"]))
            t["max_queue"] = max(t.get("max_queue", 0), max(cols.get("queue", [0])))
            acc.throughput.extend(cols.get("throughput", [0.0] * len(rows)))
            if "usage" in cols:
                t["max_token_usage"] = max(t.get("max_token_usage", 0.0), max(cols["usage"]))
            if "accept_len" in cols:
                acc.accept_len.extend(cols["accept_len"])
                acc.accept_rate.extend(cols["accept_rate"])
        if "prefill" in read:
            rows, cols = read["prefill"]
            acc.kinds.add(EventKind.PREFILL)
            t["prefill_batches"] += len(rows)
            t["new_sequences"] += sum(cols["new_seq"])
        if "http" in read:
            acc.kinds.add(EventKind.HTTP)
            for (method, path, status), times in read["http"].items():
                ev = {"method": method.decode(), "path": path.decode(), "status": int(status)}
                acc.http(ev, no, times)
        for rank in read["ranks"]:
            acc.rank(rank.decode().strip())
        acc.last_line = no + run.count(b"\n", 0, line_start)
        acc.end_time = prefix.group("ts")
        acc.last_event = kind.value
        acc.max_phase = max(acc.max_phase, 7)
