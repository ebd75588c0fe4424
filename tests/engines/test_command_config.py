"""A launch command's `--config FILE`, merged as the engines merge it.

vLLM: vllm/utils/argparse_utils.py:FlexibleArgumentParser._pull_args_from_config and
load_config_file (0.24 and 0.33 read; 0.32 checked against the installed engine's parser for
every option). SGLang: sglang/srt/server_args_config_parser.py:ConfigArgumentMerger in its
three forms (0.5.9-0.5.13, 0.5.14-0.5.22, 0.5.23), run by server_args.py:prepare_server_args.
"""

from __future__ import annotations

import pytest

from servefit.engines.command import parse_launch_command
from servefit.engines.configfile import ConfigRejection
from servefit.errors import ArgumentError

API_SERVER = "python -m vllm.entrypoints.openai.api_server"


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    """Write the file in a fresh working directory; the engines read it relative to theirs."""
    monkeypatch.chdir(tmp_path)

    def write(text: str, name: str = "c.yaml") -> str:
        (tmp_path / name).write_text(text)
        return name

    return write


def test_vllm_serve_config_goes_after_the_model_and_before_the_command_line(cfg):
    cfg("tensor_parallel_size: 2\ngpu-memory-utilization: 0.8\nenable-prefix-caching: false\n")
    cmd = parse_launch_command("vllm serve M --config c.yaml -tp 1", engine="vllm==0.33.0")
    # true/false of `vllm serve`: the top-level `vllm` parser has no --no-... option, false drops
    assert cmd.argv == [
        "M", "--tensor_parallel_size", "2", "--gpu-memory-utilization", "0.8", "-tp", "1",
    ]  # fmt: skip
    assert cmd.written_argv == ["M", "--config", "c.yaml", "-tp", "1"]
    assert cmd.config == "c.yaml"
    # `--model X` on the command line is moved to the model's place first
    cmd = parse_launch_command("vllm serve --config c.yaml --model M", engine="vllm==0.33.0")
    assert cmd.argv[0] == "M" and cmd.argv[1] == "--tensor_parallel_size"


def test_vllm_model_from_the_file_or_nowhere(cfg):
    cfg("model: M\nmax-model-len: 4096\n")
    cmd = parse_launch_command("vllm serve --config c.yaml --port 8001")
    assert cmd.argv == ["--model", "M", "--max-model-len", "4096", "--port", "8001"]
    cfg("max-model-len: 4096\n")
    with pytest.raises(ConfigRejection, match=r"^ValueError: No model specified! Please specify"):
        parse_launch_command("vllm serve --config c.yaml")


def test_vllm_api_server_false_and_nested_values(cfg):
    cfg("enable-prefix-caching: false\nspeculative-config:\n  method: mtp\napi-key: [k1]\n")
    argv = f"{API_SERVER} --model M --config c.yaml".split()
    # the api_server parser knows --no-enable-prefix-caching (0.32+); 0.24 drops false
    cmd = parse_launch_command(argv, engine="vllm==0.33.0")
    assert cmd.argv[:4] == [
        "--no-enable-prefix-caching", "--speculative-config", '{"method": "mtp"}', "--api-key",
    ]  # fmt: skip
    assert cmd.argv[4].startswith("***") and cmd.argv[-2:] == ["--model", "M"]
    assert parse_launch_command(argv, engine="vllm==0.24.0").argv[0] == "--speculative-config"


def test_sglang_config_goes_first_and_booleans_by_action(cfg):
    cfg("tp-size: 2\nenable-dp-attention: true\ndisable-radix-cache: false\nlog-level: true\n")
    cmd = parse_launch_command(
        "python -m sglang.launch_server --model-path M --config c.yaml --tp-size 1",
        engine="sglang==0.5.9",
    )
    # store_true: the flag for true, nothing for false; another flag's boolean: --KEY true
    assert cmd.argv == [
        "--tp-size", "2", "--enable-dp-attention", "--log-level", "true",
        "--model-path", "M", "--tp-size", "1",
    ]  # fmt: skip


def test_sglang_releases_merge_differently(cfg):
    cfg("preferred-sampling-params:\n  temperature: 0.5\n")
    base = "python -m sglang.launch_server --model-path M --config c.yaml"
    # 0.5.9 writes a mapping as Python's str(); 0.5.14 as JSON
    assert parse_launch_command(base, "sglang==0.5.9").argv[1] == "{'temperature': 0.5}"
    assert parse_launch_command(base, "sglang==0.5.14").argv[1] == '{"temperature": 0.5}'
    # 0.5.23 reads a store_true flag by any long spelling; before, by its dest only
    cfg("enable-hicache: true\n")
    assert parse_launch_command(base, "sglang==0.5.23").argv[0] == "--enable-hicache"
    # actions other than store / store_true are refused by name
    cfg("lora-strict-loading: true\n")
    with pytest.raises(ConfigRejection) as exc:
        parse_launch_command(base, "sglang==0.5.14")
    assert str(exc.value).startswith(
        "ValueError: Unsupported config option 'lora_strict_loading' with action "
        "'BooleanOptionalAction'"
    )
    cfg("enable-dp-attention: true\n")
    with pytest.raises(ConfigRejection, match="with action 'DeprecatedStoreTrueAction'"):
        parse_launch_command(base, "sglang==0.5.23")


def test_sglang_serve_wants_the_model_path_on_its_command_line(cfg):
    cfg("model-path: M\n")
    with pytest.raises(ConfigRejection, match=r"^Exception: Error: --model-path is required\."):
        parse_launch_command("sglang serve --config c.yaml", "sglang==0.5.23")
    assert parse_launch_command("python -m sglang.launch_server --config c.yaml").argv == [
        "--model-path",
        "M",
    ]


def test_the_file_cannot_be_read(cfg):
    with pytest.raises(ArgumentError) as exc:
        parse_launch_command("vllm serve M --config missing.yaml")
    assert str(exc.value) == (
        "--config missing.yaml: cannot read the file here (No such file or directory); vLLM "
        "stops on it too: FileNotFoundError: [Errno 2] No such file or directory: 'missing.yaml'"
    )
    with pytest.raises(ArgumentError, match=r"SGLang stops on it too: ValueError: Config file "):
        parse_launch_command("python -m sglang.launch_server --config missing.yaml")
    cfg("a: [1\n")
    with pytest.raises(ArgumentError) as exc:
        parse_launch_command("vllm serve M --config c.yaml")
    assert str(exc.value) == (
        "--config c.yaml is not valid YAML: while parsing a flow sequence, expected ',' or ']', "
        "but got '<stream end>' (line 2, column 1)"
    )


def test_the_engine_refuses_the_file(cfg):
    cfg("- 1\n", "list.yaml")
    with pytest.raises(ConfigRejection, match=r"^AttributeError: 'list' object has no attribute"):
        parse_launch_command("vllm serve M --config list.yaml")
    with pytest.raises(ConfigRejection, match=r"^ValueError: Config file must contain a dict"):
        parse_launch_command("python -m sglang.launch_server --config list.yaml")
    cfg("", "empty.yaml")  # SGLang reads an empty file as no options; vLLM calls None.items()
    assert parse_launch_command("python -m sglang.launch_server --config empty.yaml").argv == []
    with pytest.raises(ConfigRejection, match=r"^AttributeError: 'NoneType' object has no attr"):
        parse_launch_command("vllm serve M --config empty.yaml")
    with pytest.raises(ConfigRejection, match=r"^ValueError: Config file must be of a yaml/yml"):
        parse_launch_command("vllm serve M --config c.json")
    with pytest.raises(ConfigRejection, match=r"^AssertionError: More than one config file"):
        parse_launch_command("vllm serve M --config a.yaml --config b.yaml")
    with pytest.raises(ConfigRejection, match=r"^ValueError: No config file specified after"):
        parse_launch_command("python -m sglang.launch_server --config")


def test_config_equals_form_is_not_read(cfg):
    cfg("tp-size: 2\n")
    cmd = parse_launch_command("python -m sglang.launch_server --config=c.yaml")
    assert cmd.argv == ["--config=c.yaml"] and cmd.config is None
    assert cmd.notes[0].startswith("--config=c.yaml: SGLang reads a config file only from")


def test_secrets_of_the_file_are_masked(cfg):
    cfg("api-key: sk-the-secret-value\nmodel-path: M\n")
    cmd = parse_launch_command("python -m sglang.launch_server --config c.yaml")
    assert cmd.argv[0] == "--api-key" and cmd.argv[1].startswith("***")
    assert "sk-the-secret-value" not in " ".join(cmd.argv)
