"""Live progress from real engine logs (tests/data/ground-truth): the stage reached and each number
must equal what the log line prints (the lines are quoted in the comments)."""

from __future__ import annotations

from servefit.launch.events import LogProgress, split_lines
from tests.groundtruth import GT


def read(name: str, engine: str) -> LogProgress:
    path = GT / name
    progress = LogProgress(engine)
    for line in path.read_text(encoding="utf-8").splitlines():
        progress.feed(line)
    return progress


def test_sglang_dense_l4_log():
    p = read("sgl_qwq32b_4xL4_tp4_g6_12xlarge.txt", "sglang")
    f = p.facts
    assert p.stage == "capturing_graphs"
    # "Load weight begin. avail mem=21.63 GB"
    # "Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB, mem usage=15.54 GB."
    assert (f.avail_before_load_gib, f.avail_after_load_gib, f.weights_gib) == (21.63, 6.09, 15.54)
    # "KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB"
    assert (f.kv_tokens, f.kv_gib) == (46611, 2.84)
    assert f.pool_end_avail_gib == 2.09  # "Memory pool end. avail mem=2.09 GB"
    # "Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB." (0.4.x order)
    assert (f.graph_s, f.graph_gib) == (7.23, 0.93)
    # "max_total_num_tokens=46611, ..., max_running_requests=2049, context_len=131072"
    assert (f.max_running_requests, f.context_len) == (2049, 131072)
    assert f.mamba_slots is None and f.errors == [] and not f.engine_says_ready


def test_sglang_hybrid_h100_log_in_0_5_18_format():
    p = read("sgl_qwen38_27b_fp8_1xh100_v0518.txt", "sglang")
    f = p.facts
    # "Load weight end. elapsed=429.52 s, type=Qwen3_5ForConditionalGeneration, quant=fp8, fmt=e4m3,
    #  avail mem=50.01 GB, mem usage=28.47 GB."
    assert (f.avail_after_load_gib, f.weights_gib) == (50.01, 28.47)
    # "Mamba Cache is allocated. max_mamba_cache_size: 124, conv_state size: 0.34GB, ssm_state size: 17.58GB"
    assert (f.mamba_slots, f.mamba_gib, f.spec_state_gib) == (124, 17.92, None)
    # "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 330323, K size: 10.08 GB, V size: 10.08 GB"
    assert (f.kv_tokens, f.kv_gib) == (330323, 20.16)
    # "Capture target decode CUDA graph end. elapsed=4.76 s, mem usage=0.10 GB, avail mem=8.90 GB."
    assert (f.graph_s, f.graph_gib) == (4.76, 0.10)
    assert f.engine_says_ready  # "The server is fired up and ready to roll!"
    assert p.stage == "capturing_graphs"  # ready is decided by probes, never by a log line


def test_sglang_lfm2_short_conv_state():
    f = read("sgl_lfm2_700m_bench1batch_16gb_blazingbhavneek.txt", "sglang").facts
    # "Mamba Cache is allocated. max_mamba_cache_size: 85292, conv_state size: 4.88GB, ssm_state size: 0.00GB "
    assert (f.mamba_slots, f.mamba_gib) == (85292, 4.88)
    # "Capture cuda graph end. Time elapsed: 1.01 s. mem usage=0.03 GB. avail mem=2.39 GB."
    assert (f.graph_s, f.graph_gib) == (1.01, 0.03)


def test_vllm_v1_log_with_prefixes():
    p = read("vllm_nemotron3_nano_4b_fp8_1xgb10_util015_nv2601.txt", "vllm")
    f = p.facts
    assert f.weights_gib == 4.9054  # "Model loading took 4.9054 GiB memory and 44.986674 seconds"
    assert f.kv_gib == 11.15  # "Available KV cache memory: 11.15 GiB"
    assert f.kv_tokens == 208320  # "GPU KV cache size: 208,320 tokens"
    # "Maximum concurrency for 8,192 tokens per request: 98.20x"
    assert (f.context_len, f.max_concurrency) == (8192, 98.20)
    assert (f.graph_s, f.graph_gib) == (
        24,
        1.00,
    )  # "Graph capturing finished in 24 secs, took 1.00 GiB"
    assert p.stage == "capturing_graphs"


def test_stages_never_move_backwards():
    p = LogProgress("sglang")
    p.feed(
        "[2026-02-01 00:05:03 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=2.98 GB"
    )
    p.feed("[2026-02-01 00:05:03 TP1] Load weight begin. avail mem=21.63 GB")  # a late rank
    assert p.stage == "capturing_graphs"
    assert p.facts.avail_before_load_gib == 21.63  # the number is still taken


def test_error_lines_are_kept_without_their_prefix():
    p = LogProgress("vllm")
    p.feed(
        "(EngineCore_DP0 pid=7) ERROR 06-01 09:47:57 [core.py:1584] ValueError: max_num_seqs (1024) "
        "exceeds available Mamba cache blocks (524)"
    )
    p.feed('  File "x.py", line 3, in f')  # traceback body: not an error line
    p.feed(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
    )
    assert p.facts.errors == [
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (524)",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]


def test_split_lines_treats_carriage_return_as_a_line_end():
    lines, rest = split_lines(
        b"a\nCapturing CUDA graphs  10%|#\rCapturing CUDA graphs 100%|##\npart"
    )
    assert lines == ["a", "Capturing CUDA graphs  10%|#", "Capturing CUDA graphs 100%|##"]
    assert rest == b"part"
    assert split_lines(b"no newline") == ([], b"no newline")


def test_python_failing_to_start_the_engine_is_an_error_line():
    # CPython runpy._run_module_as_main: sys.exit("%s: %s" % (sys.executable, exc))
    line = (
        "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' "
        "(ModuleNotFoundError: No module named 'sglang')"
    )
    p = LogProgress("sglang")
    p.feed(line)
    assert p.facts.errors == [line]
