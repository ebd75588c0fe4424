"""servefit.validate: numbers, paths and JSON checked at the edge, one clear error each."""

from __future__ import annotations

import json
import math
import os

import pytest

from servefit.errors import ArgumentError, ConfigError
from servefit.validate import (
    bounded_int,
    expand_path,
    finite_float,
    json_depth,
    load_json,
    read_json_file,
    readable_file,
    writable_dir,
    writable_file,
)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "nan", "inf", "-inf", "1e400"])
def test_non_finite_floats_are_refused(value):
    with pytest.raises(ArgumentError, match="--x must be a finite number"):
        finite_float(value, "--x")


@pytest.mark.parametrize(
    ("value", "low", "high", "low_open", "message"),
    [
        (0.0, 0.0, None, True, "--x must be positive, got 0"),
        (-1.0, 0.0, None, False, "--x must be zero or more, got -1"),
        (5.0, 0.0, 4.0, False, "--x must be at most 4, got 5"),
        ("abc", None, None, False, "--x must be a number, got 'abc'"),
        (True, None, None, False, "--x must be a number, got True"),
    ],
)
def test_float_ranges(value, low, high, low_open, message):
    with pytest.raises(ArgumentError) as exc:
        finite_float(value, "--x", low=low, high=high, low_open=low_open)
    assert str(exc.value) == message


def test_floats_in_range_pass():
    assert finite_float("0.5", "--x", low=0, high=1) == 0.5
    assert finite_float(1, "--x", low=0, low_open=True) == 1.0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1e20", "--n must be an integer, got '1e20'"),
        ("9" * 41, "--n must be an integer"),  # never int() of thousands of digits
        (4.5, "--n must be an integer, got 4.5"),
        (0, "--n must be positive, got 0"),
        (1 << 70, "--n must be at most 65536"),
        (False, "--n must be an integer, got False"),
    ],
)
def test_integers_are_bounded(value, message):
    with pytest.raises(ArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bounded_int(value, "--n", low=1, high=65536)


def test_integers_in_range_pass():
    assert bounded_int("8", "--n", low=1, high=16) == 8
    assert bounded_int(8.0, "--n", low=1, high=16) == 8


def test_paths_that_cannot_name_a_file():
    with pytest.raises(ArgumentError, match="user 'nosuchuser' is not known"):
        expand_path("~nosuchuser/config.json", "model")
    with pytest.raises(ArgumentError, match="the path is too long"):
        expand_path("/tmp/" + "a/" * 3000, "model")
    with pytest.raises(ArgumentError, match="a path component is too long"):
        expand_path("/tmp/" + "a" * 300, "model")
    with pytest.raises(ArgumentError, match="NUL"):
        expand_path("a\0b", "model")
    with pytest.raises(ArgumentError, match="empty path"):
        expand_path("  ", "model")
    assert str(expand_path("~/x", "model")) == os.path.expanduser("~/x")


def test_files_to_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ArgumentError, match="is a FIFO, not a regular log file"):
        readable_file(fifo, "log")
    with pytest.raises(ArgumentError, match="is a directory, not a log file"):
        readable_file(tmp_path, "log")
    with pytest.raises(ArgumentError, match="no such log file"):
        readable_file(tmp_path / "none", "log")
    with pytest.raises(ArgumentError, match="no such log file"):  # a parent that is a file
        (tmp_path / "f").write_text("x")
        readable_file(tmp_path / "f" / "g", "log")
    if os.path.exists("/dev/zero"):
        with pytest.raises(ArgumentError, match="is a device or socket"):
            readable_file("/dev/zero", "log")


def test_places_to_write(tmp_path):
    assert writable_dir(tmp_path / "a" / "b", "--runs-dir").is_dir()  # created
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArgumentError, match="is not a directory"):
        writable_dir(tmp_path / "file", "--runs-dir")
    with pytest.raises(ArgumentError, match="is not a directory|Not a directory"):
        writable_dir(tmp_path / "file" / "sub", "--runs-dir")
    with pytest.raises(ArgumentError, match="no such directory"):
        writable_file(tmp_path / "none" / "x.html", "--html")
    with pytest.raises(ArgumentError, match="is a directory"):
        writable_file(tmp_path, "--html")
    assert writable_file(tmp_path / "x.html", "--html").name == "x.html"


def test_json_limits(tmp_path):
    assert json_depth(b'{"a": [1, {"b": "[[[["}]}') == 3  # brackets in strings do not count
    with pytest.raises(ConfigError, match="nested 100000 levels deep"):
        load_json(b"[" * 100_000 + b"]" * 100_000, "index", error=ConfigError)
    with pytest.raises(ConfigError, match="an integer of 5000 digits is implausible"):
        load_json(b'{"hidden_size": ' + b"9" * 5000 + b"}", "config", error=ConfigError)
    with pytest.raises(ConfigError, match="is not UTF-8"):
        load_json(b'{"a": "\xff"}', "config", error=ConfigError)
    with pytest.raises(ConfigError, match="more than servefit reads"):
        load_json(b" " * 101, "config", max_bytes=100, error=ConfigError)
    # bare Infinity / NaN, as official Nemotron-H configs write them
    assert load_json(b'{"t": [0.0, Infinity]}', "config")["t"][1] == math.inf
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"a": 1}))
    assert read_json_file(p, "config") == {"a": 1}
