"""Recognising pasted launch commands: engine, engine argv, environment."""

from __future__ import annotations

import pytest

from servefit.engines.command import LaunchCommand, parse_launch_command
from servefit.errors import ArgumentError

SEED = (
    "nohup /root/ml-env/bin/python3 -m sglang.launch_server --model-path /root/models/Qwen3.6-27B "
    "--port 30000 --host 0.0.0.0 --tp-size 2 --mem-fraction-static 0.88 --context-length 32768 "
    "--max-running-requests 16 --mamba-full-memory-ratio 0.5 --reasoning-parser qwen3 "
    "--tool-call-parser qwen3_coder --speculative-algo NEXTN --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 > /root/sglang-serve.log 2>&1 &"
)
SEED_ARGV = SEED.split(" > ")[0].split()[4:]


def test_seed_command():
    cmd = parse_launch_command(SEED)
    assert cmd == LaunchCommand(
        engine="sglang", argv=SEED_ARGV, env={}, entrypoint="python -m sglang.launch_server"
    )
    assert cmd.argv[:2] == ["--model-path", "/root/models/Qwen3.6-27B"]
    assert cmd.argv[-2:] == ["--speculative-num-draft-tokens", "4"]


def test_seed_as_a_list():
    assert parse_launch_command(SEED.split()).argv == SEED_ARGV


def test_env_prefix():
    cmd = parse_launch_command(
        "CUDA_VISIBLE_DEVICES=0,1 SGLANG_MAMBA_SSM_DTYPE=bfloat16 python3 -m sglang.launch_server "
        "--tp 2"
    )
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_MAMBA_SSM_DTYPE": "bfloat16"}
    assert cmd.argv == ["--tp", "2"]


@pytest.mark.parametrize(
    "command",
    [
        "export CUDA_VISIBLE_DEVICES=0,1 && python -m sglang.launch_server --tp 2",
        "export CUDA_VISIBLE_DEVICES=0,1; nohup env python -m sglang.launch_server --tp 2",
        "env CUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server --tp 2 &",
        "nohup env CUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server --tp 2 &> log &",
        "CUDA_VISIBLE_DEVICES='0,1' exec python3.11 -u -m sglang.launch_server --tp 2 | tee x.log",
        "cd /srv && CUDA_VISIBLE_DEVICES=0,1 python -X faulthandler -m sglang.launch_server --tp 2",
        'CUDA_VISIBLE_DEVICES="0,1" python -msglang.launch_server --tp 2 >>log 2>>err',
    ],
)
def test_env_wrappers_and_separators(command):
    cmd = parse_launch_command(command)
    assert cmd.engine == "sglang"
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert cmd.argv == ["--tp", "2"]


@pytest.mark.parametrize(
    "tail",
    [
        "",
        " &",
        " > /root/x.log 2>&1 &",
        " >/root/x.log 2>&1",
        " 1> out 2> err",
        " 2>/dev/null",
        " &> log",
        " >> log 2>&1 & disown",
        " < /dev/null > log 2>&1 &",
        " | tee -a log",
        "; echo started",
    ],
)
def test_redirections_are_ignored(tail):
    cmd = parse_launch_command("python -m sglang.launch_server --port 30000" + tail)
    assert cmd.argv == ["--port", "30000"]


def test_digits_before_a_spaced_redirection_stay_arguments():
    # `30000 > log` is the value 30000 then a redirection; `30000> log` would be an fd.
    assert parse_launch_command("sglang serve --port 30000 > log").argv == ["--port", "30000"]


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "-m", "sglang.launch_server", "--port", "1", ">", "log", "2>&1", "&"],
        ["python", "-m", "sglang.launch_server", "--port", "1", ">log", "2>", "err"],
        ["python", "-m", "sglang.launch_server", "--port", "1", "&>>", "log"],
    ],
)
def test_redirections_in_a_split_list(argv):
    assert parse_launch_command(argv).argv == ["--port", "1"]


def test_quoting_and_continuations():
    cmd = parse_launch_command(
        "python -m sglang.launch_server \\\n"
        '  --json-model-override-args \'{"rope_scaling": {"factor": 4.0}}\' \\\n'
        "  --chat-template \"a b\" --served-model-name 'x y'\\ z  # a comment\n"
    )
    assert cmd.argv == [
        "--json-model-override-args",
        '{"rope_scaling": {"factor": 4.0}}',
        "--chat-template",
        "a b",
        "--served-model-name",
        "x y z",
    ]


@pytest.mark.parametrize(
    ("command", "engine", "entrypoint", "argv"),
    [
        (
            "sglang serve --model-path m --tp 2",
            "sglang",
            "sglang serve",
            ["--model-path", "m", "--tp", "2"],
        ),
        ("/opt/venv/bin/sglang serve --model m", "sglang", "sglang serve", ["--model", "m"]),
        ("python -m sglang.cli.main serve --model m", "sglang", "sglang serve", ["--model", "m"]),
        (
            "python /src/sglang/python/sglang/launch_server.py --model m",
            "sglang",
            "python -m sglang.launch_server",
            ["--model", "m"],
        ),
        (
            "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2",
            "vllm",
            "vllm serve",
            ["Qwen/Qwen3-8B", "--tensor-parallel-size", "2"],
        ),
        (
            "python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B",
            "vllm",
            "python -m vllm.entrypoints.openai.api_server",
            ["--model", "Qwen/Qwen3-8B"],
        ),
        ("VLLM_USE_V1=1 nohup vllm serve m > log 2>&1 &", "vllm", "vllm serve", ["m"]),
    ],
)
def test_entrypoints(command, engine, entrypoint, argv):
    cmd = parse_launch_command(command)
    assert (cmd.engine, cmd.entrypoint, cmd.argv) == (engine, entrypoint, argv)


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "python train.py --tp 2",
        "python -m sglang.bench_serving --port 30000",
        "sglang version",
        "vllm bench",
        "CUDA_VISIBLE_DEVICES=0 > log",
        ["python3", "-c", "print(1)"],
    ],
)
def test_not_a_launch_command(command):
    with pytest.raises(ArgumentError) as info:
        parse_launch_command(command)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(("not an SGLang or vLLM launch command", "empty launch command"))


@pytest.mark.parametrize("command", ["", "   ", [], "> log 2>&1"])
def test_empty(command):
    with pytest.raises(ArgumentError, match="empty launch command"):
        parse_launch_command(command)


def test_unterminated_quote():
    with pytest.raises(ArgumentError, match="unterminated ' quote"):
        parse_launch_command("python -m sglang.launch_server --chat-template 'oops")
