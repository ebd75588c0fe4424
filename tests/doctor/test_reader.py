"""The streaming reader: per-rank prefixes, bounded memory, cut and over-long lines."""

from __future__ import annotations

import io
import tracemalloc

from servefit.doctor.launches import read_log
from servefit.doctor.reader import MAX_LINE, LineSource, match, parse_prefix
from servefit.doctor.rules import EventKind


def test_prefixes_give_rank_and_time():
    cases = {
        "[2026-02-01 00:05:02 TP0] Load weight begin. avail mem=15.24 GB": (
            "TP0",
            "2026-02-01 00:05:02",
            None,
        ),
        "[2026-02-01 00:05:02.123 DP1 PP0 TP3 EP3] x": (
            "DP1 PP0 TP3 EP3",
            "2026-02-01 00:05:02",
            None,
        ),
        "(EngineCore_DP0 pid=123) INFO 06-12 10:00:00 [gpu_worker.py:123] x": (
            "DP0",
            "06-12 10:00:00",
            "EngineCore_DP0",
        ),
        "(VllmWorker TP1 pid=9) INFO 06-12 10:00:00 [gpu_worker.py:1] x": (
            "TP1",
            "06-12 10:00:00",
            "VllmWorker TP1",
        ),
        "(Worker_TP0 pid=26347) INFO 11-06 10:51:48 [gpu_worker.py:349] x": (
            "TP0",
            "11-06 10:51:48",
            "Worker_TP0",
        ),
        "(VllmWorkerProcess pid=1786) INFO 02-11 07:40:45 model_runner.py:1115] x": (
            "pid 1786",
            "02-11 07:40:45",
            "VllmWorkerProcess",
        ),
        "INFO 02-11 07:40:45 model_runner.py:1115] x": ("", "02-11 07:40:45", None),
        "2026-05-01 22:44:30.254 | (APIServer pid=1) INFO 05-01 20:44:30 [utils.py:233] x": (
            "",
            "2026-05-01 22:44:30",
            "APIServer",
        ),
    }
    for text, (rank, ts, proc) in cases.items():
        line = parse_prefix(1, text)
        assert (line.rank, line.ts, line.proc) == (rank, ts, proc), text


def test_line_numbers_across_chunks_and_overlong_lines():
    data = (
        b"a\n[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=1.00 GB\n"
        + b"x" * (3 * MAX_LINE)
        + b" Load weight begin. avail mem=9 GB\nb\n[2026-01-01 00:00:00 TP1] Load weight begin. avail mem=2.00 GB"
    )
    src = LineSource(io.BytesIO(data))
    src.CHUNK = 1000  # many chunk boundaries, one inside a line
    hits = list(src.hits())
    # line 3 is cut at MAX_LINE: its key beyond the cut is not seen, and nothing of it is held
    assert [no for no, _ in hits] == [2, 5]
    assert src.lines == 5 and src.ends_mid_line


def test_ansi_colours_are_ignored():
    log = read_log(
        ["\x1b[32mINFO\x1b[0m 06-12 10:00:00 [gpu_worker.py:1] Available KV cache memory: 3.5 GiB"]
    )
    assert log.launches[0].ranks[0].kv_available_gib == 3.5


def test_a_million_lines_in_bounded_memory():
    """~1e6 lines from a generator (blocks of 1000 lines, as a pipe delivers them): the peak
    stays far below the size of the input (~90 MB), because only facts are kept."""
    noise = "some library prints a lot of text to stdout while the engine is serving requests\n"
    decode = (
        "[2026-04-20 10:44:40 TP0] Decode batch, #running-req: 3, #full token: 1234, full token usage: 0.01, "
        "mamba num: 1, mamba usage: 0.06, accept len: 2.31, accept rate: 0.55, cuda graph: True, "
        "gen throughput (token/s): 62.31, #queue-req: 0\n"
    )
    block = (decode + noise * 199) * 5  # 1000 lines

    def lines():
        yield "[2026-04-20 10:41:05] server_args=ServerArgs(model_path='/m', tp_size=2)\n"
        yield "[2026-04-20 10:42:14] The server is fired up and ready to roll!\n"
        for _ in range(1000):
            yield block

    tracemalloc.start()
    log = read_log(lines())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert log.lines == 1_000_002
    assert log.launches[0].traffic.decode_logs == 5000
    assert log.launches[0].spec.accept_len_mean == 2.31
    assert peak < 2_000_000  # bytes; the input is ~90 MB


def test_a_worker_process_prefix_is_not_a_key_only_its_death_is():
    # vLLM V1 prefixes every line of a worker process with "(Worker pid=N)" (tests/data/
    # engine-logs/v0320-qwen3-pc-env1g.log); only V0's "Worker ... pid N died, exit code: C"
    # (multiproc_worker_utils.py:WorkerMonitor, tests/data/ground-truth/
    # vllm_v0_r1_distill_qwen14b_2x4090_v13061.txt line 10) is an event
    chatter = (
        "(Worker pid=29292) WARNING 12-01 06:51:52 [cpu_worker.py:114] libtcmalloc is not found "
        "in LD_PRELOAD."
    )
    death = (
        "ERROR 02-11 07:40:49 multiproc_worker_utils.py:124] Worker VllmWorkerProcess pid 1786 "
        "died, exit code: -15"
    )
    hits = list(LineSource([chatter, death]).hits())
    assert [no for no, _ in hits] == [2]
    event, _ = match(death)
    assert event is not None and event["kind"] == EventKind.EXIT
    assert (event["proc"], event["pid"], event["code"]) == ("VllmWorkerProcess", 1786, -15)
