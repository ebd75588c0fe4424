"""The launch command as typed -> what servefit executes, and where the server will listen."""

from __future__ import annotations

import pytest

from servefit.errors import ArgumentError
from servefit.launch.command import parse_launch, visible_devices

SEED = (
    "CUDA_VISIBLE_DEVICES=0,1 nohup /root/ml-env/bin/python3 -m sglang.launch_server "
    "--model-path /root/models/Qwen3.6-27B --port 30000 --host 0.0.0.0 --tp-size 2 "
    "--mem-fraction-static 0.88 > /root/sglang-serve.log 2>&1 &"
)


def test_the_seed_command_pasted_as_one_string():
    launch = parse_launch([SEED])
    # wrappers, redirections and `&` dropped; the interpreter path kept as written
    assert launch.argv == [
        "/root/ml-env/bin/python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/root/models/Qwen3.6-27B",
        "--port",
        "30000",
        "--host",
        "0.0.0.0",
        "--tp-size",
        "2",
        "--mem-fraction-static",
        "0.88",
    ]
    assert launch.env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert launch.engine == "sglang" and launch.recognised
    assert (launch.host, launch.port, launch.world_size) == ("0.0.0.0", 30000, 2)
    assert launch.url == "http://127.0.0.1:30000"  # a wildcard listener is reached on loopback


def test_sglang_defaults_and_flag_aliases():
    # SGLang's ServerArgs: host "127.0.0.1", port 30000; --tp is an alias of --tp-size
    launch = parse_launch(
        ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "4", "--pp-size", "2"]
    )
    assert (launch.host, launch.port) == ("127.0.0.1", 30000)
    assert (launch.world_size, launch.parallel) == (8, "tp 4 x pp 2")


def test_dp_attention_does_not_multiply_the_world():
    launch = parse_launch(
        [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--tp-size",
            "4",
            "--dp-size",
            "4",
            "--enable-dp-attention",
        ]
    )
    assert launch.world_size == 4


def test_vllm_serve_defaults():
    # vLLM FrontendArgs: host None (all interfaces), port 8000
    launch = parse_launch(["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2", "--port=8001"])
    assert launch.engine == "vllm" and launch.argv[:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert (launch.host, launch.port, launch.world_size) == ("0.0.0.0", 8001, 2)


def test_a_wrapper_needs_the_engine_named():
    with pytest.raises(ArgumentError, match="--engine sglang"):
        parse_launch(["./serve.sh", "--port", "9000"])
    launch = parse_launch(["./serve.sh", "--port", "9000"], engine="sglang==0.5.9")
    assert not launch.recognised and launch.argv == ["./serve.sh", "--port", "9000"]
    assert launch.port == 9000


def test_engine_mismatch_and_bad_port_are_one_line_errors():
    with pytest.raises(ArgumentError, match="runs sglang"):
        parse_launch(["python", "-m", "sglang.launch_server"], engine="vllm")
    with pytest.raises(ArgumentError, match="--port must be in 1..65535"):
        parse_launch(["python", "-m", "sglang.launch_server", "--port", "70000"])
    with pytest.raises(ArgumentError, match="no launch command"):
        parse_launch([])


def test_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_devices({}) is None
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "0, 1"}) == ["0", "1"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []  # hides every GPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert visible_devices({}) == ["3"]  # servefit's own environment is inherited
