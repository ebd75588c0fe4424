"""SGLang flag tables (generated from the wheels) and the argparse-faithful argv reader."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servefit.engines import registry
from servefit.engines.base import Flag
from servefit.engines.command import parse_launch_command
from servefit.engines.sglang.flags import (
    EngineFlag,
    available_versions,
    load_flags,
    parse_argv,
)
from servefit.errors import EngineVersionError

REPO = Path(__file__).resolve().parents[3]
# every registered SGLang profile has its flag table, and no table is left without one
VERSIONS = tuple(registry.profile_ids("sglang"))
WHEELS = Path(os.environ.get("SERVEFIT_SGLANG_WHEELS", "/work/wheels"))

SEED = (
    "nohup /root/ml-env/bin/python3 -m sglang.launch_server --model-path /root/models/Qwen3.6-27B "
    "--port 30000 --host 0.0.0.0 --tp-size 2 --mem-fraction-static 0.88 --context-length 32768 "
    "--max-running-requests 16 --mamba-full-memory-ratio 0.5 --reasoning-parser qwen3 "
    "--tool-call-parser qwen3_coder --speculative-algo NEXTN --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 > /root/sglang-serve.log 2>&1 &"
)
SEED_VALUES = {
    "model_path": "/root/models/Qwen3.6-27B",
    "port": 30000,
    "host": "0.0.0.0",
    "tp_size": 2,
    "mem_fraction_static": 0.88,
    "context_length": 32768,
    "max_running_requests": 16,
    "mamba_full_memory_ratio": 0.5,
    "reasoning_parser": "qwen3",
    "tool_call_parser": "qwen3_coder",
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


def _parse(version: str, *argv: str):
    return parse_argv(load_flags(version), list(argv))


def _table(version: str) -> list[dict]:
    slug = version.replace(".", "_")
    text = resources.files("servefit.engines.sglang").joinpath(f"flags_{slug}.json").read_text()
    return json.loads(text)


def _by_name(version: str) -> dict[str, dict]:
    return {name: e for e in _table(version) for name in e["names"]}


# --------------------------------------------------------------------------------------------
# The seed command
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_seed_command_parses_to_engine_dests(version):
    cmd = parse_launch_command(SEED)
    parsed = parse_argv(load_flags(version), cmd.argv)
    assert parsed.errors == []
    assert parsed.unknown == []
    assert parsed.positionals == []
    assert parsed.missing == []
    assert parsed.values == SEED_VALUES
    assert all(type(parsed.values[k]) is type(v) for k, v in SEED_VALUES.items())
    # `--speculative-algo` is argparse's prefix abbreviation, not a registered alias.
    assert parsed.given["speculative_algorithm"] == "--speculative-algorithm"


# --------------------------------------------------------------------------------------------
# Spellings
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["--tp-size", "4"], "tp_size", 4),
        (["--tensor-parallel-size", "4"], "tp_size", 4),
        (["--tp", "4"], "tp_size", 4),  # prefix of --tp-size, unique in both
        (["--tp-size=4"], "tp_size", 4),
        (["--model", "m"], "model_path", "m"),
        (["--model-path=m"], "model_path", "m"),
        (["--pp-size", "2"], "pp_size", 2),
        (["--pipeline-parallel-size", "2"], "pp_size", 2),
        (["--dp-size", "2"], "dp_size", 2),
        (["--data-parallel-size", "2"], "dp_size", 2),
        (["--dp", "2"], "dp_size", 2),
        (["--ep", "8"], "ep_size", 8),
        (["--expert-parallel-size", "8"], "ep_size", 8),
        (["--speculative-algorithm", "EAGLE"], "speculative_algorithm", "EAGLE"),
        (["--speculative-algo=EAGLE"], "speculative_algorithm", "EAGLE"),
        (["--speculative-draft-model", "d"], "speculative_draft_model_path", "d"),
        (["--mem-fraction-static", "0.8"], "mem_fraction_static", 0.8),
        (["--kv-cache-dtype", "fp8_e4m3"], "kv_cache_dtype", "fp8_e4m3"),
        (["--mamba-ssm-dtype", "bfloat16"], "mamba_ssm_dtype", "bfloat16"),
        (["--trust-remote-code"], "trust_remote_code", True),
        (["--disable-radix-cache"], "disable_radix_cache", True),
        (["--language-only"], "language_only", True),
        (["--quantization", "fp8"], "quantization", "fp8"),
        (["--port", "-1"], "port", -1),  # a negative number is a value, not an option
    ],
)
def test_aliases_and_forms(version, argv, dest, value):
    parsed = _parse(version, *argv)
    assert parsed.errors == [] and parsed.unknown == []
    assert parsed.values == {dest: value}


@pytest.mark.parametrize("version", VERSIONS)
def test_repeated_flag_last_wins(version):
    assert _parse(version, "--tp", "2", "--tp-size", "4").values == {"tp_size": 4}


@pytest.mark.parametrize("version", VERSIONS)
def test_ambiguous_prefix_is_an_error(version):
    parsed = _parse(version, "--pp", "2")
    assert parsed.values == {}
    assert parsed.errors == [
        "ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size, "
        "--pp-async-batch-depth"
    ]


def test_cuda_graph_max_bs_split_in_0_5_23():
    assert _parse("0.5.9", "--cuda-graph-max-bs", "8").values == {"cuda_graph_max_bs": 8}
    parsed = _parse("0.5.23", "--cuda-graph-max-bs", "8")
    assert parsed.errors == [
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill"
    ]
    assert _parse("0.5.23", "--cuda-graph-max-bs-decode", "8").values == {
        "cuda_graph_max_bs_decode": 8
    }


# --------------------------------------------------------------------------------------------
# Unknown flags, bad values
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_flag_is_reported_not_an_error(version):
    parsed = _parse(version, "--no-such-flag", "7", "--tp", "2", "--other=1", "--flag-only")
    assert parsed.unknown == ["--no-such-flag", "--other", "--flag-only"]
    assert parsed.errors == []
    assert parsed.positionals == []  # the unknown flag's value is not a positional
    assert parsed.values == {"tp_size": 2}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--tp-size", "two"], "--tp-size expects an int, got 'two'"),
        (["--tp=2.5"], "--tp-size expects an int, got '2.5'"),
        (["--mem-fraction-static", "lots"], "--mem-fraction-static expects a float, got 'lots'"),
        (["--port"], "--port: expected one argument"),
        (["--port", "--host", "h"], "--port: expected one argument"),
        (["--trust-remote-code=yes"], "--trust-remote-code: ignored explicit argument 'yes'"),
        (["--json-model-override-args", "{bad"], None),  # a str flag: engine checks later
        (
            ["--dtype", "int3"],
            "--dtype: invalid choice 'int3' (choose from auto, half, "
            "float16, bfloat16, float, float32)",
        ),
    ],
)
def test_bad_values(version, argv, error):
    parsed = _parse(version, *argv)
    assert parsed.errors == ([error] if error else [])
    if error:
        assert parsed.values.get("tp_size") is None


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_choice_for_parsers(version):
    parsed = _parse(version, "--reasoning-parser", "nope", "--tool-call-parser", "qwen3_coder")
    assert len(parsed.errors) == 1
    assert parsed.errors[0].startswith("--reasoning-parser: invalid choice 'nope' (choose from ")
    assert parsed.values == {"tool_call_parser": "qwen3_coder"}


def test_missing_required_is_reported_separately():
    parsed = _parse("0.5.23", "--tp", "2")
    assert parsed.errors == []
    assert parsed.missing == ["--model-path"]


# --------------------------------------------------------------------------------------------
# Kinds and actions
# --------------------------------------------------------------------------------------------


def test_lists_keep_item_types():
    parsed = _parse("0.5.9", "--cuda-graph-bs", "1", "2", "4", "--tp", "2")
    assert parsed.values == {"cuda_graph_bs": [1, 2, 4], "tp_size": 2}
    parsed = _parse("0.5.23", "--cuda-graph-bs-decode", "1", "8", "--cuda-graph-bs-prefill=16")
    assert parsed.values == {"cuda_graph_bs_decode": [1, 8], "cuda_graph_bs_prefill": [16]}
    assert _parse("0.5.9", "--cuda-graph-bs").errors == [
        "--cuda-graph-bs: expected at least one argument"
    ]
    # nargs="*" takes zero or more
    assert _parse("0.5.9", "--lora-target-modules").values == {"lora_target_modules": []}


def test_human_readable_ints_only_in_0_5_23():
    assert _parse("0.5.23", "--context-length", "32k").values == {"context_length": 32000}
    assert _parse("0.5.23", "--context-length", "32Ki").values == {"context_length": 32768}
    assert _parse("0.5.23", "--max-total-tokens", "1.5M").values == {"max_total_tokens": 1500000}
    assert _parse("0.5.9", "--context-length", "32k").errors == [
        "--context-length expects an int, got '32k'"
    ]
    assert _parse("0.5.23", "--context-length", "1.5Ki").errors == [
        "--context-length: decimals are not allowed with IEC suffix 'Ki'"
    ]


def test_json_and_nullable_values():
    parsed = _parse("0.5.9", "--json-model-override-args", '{"a": 1}')
    assert parsed.values == {"json_model_override_args": '{"a": 1}'}  # a str in the engine
    by = _by_name("0.5.9")
    json_flag = next(n for n, e in by.items() if e["value_parser"] == "json.loads")
    assert _parse("0.5.9", json_flag, '{"k": [1]}').values == {by[json_flag]["dest"]: {"k": [1]}}
    assert _parse("0.5.9", json_flag, "{nope").errors == [f"{json_flag} expects JSON, got '{{nope'"]


def test_nargs_optional_uses_const():
    for version in VERSIONS:
        assert _parse(version, "--model-checksum", "--tp", "2").values == {
            "model_checksum": "",
            "tp_size": 2,
        }
        assert _parse(version, "--model-checksum", "sums.json").values == {
            "model_checksum": "sums.json"
        }


def test_boolean_optional_action_in_0_5_23():
    assert _parse("0.5.23", "--enable-tf32-matmul").values == {"enable_tf32_matmul": True}
    assert _parse("0.5.23", "--no-enable-tf32-matmul").values == {"enable_tf32_matmul": False}
    assert _parse("0.5.9", "--no-enable-tf32-matmul").unknown == ["--no-enable-tf32-matmul"]


def test_deprecated_flags_warn_like_the_engine():
    parsed = _parse("0.5.23", "--disable-cuda-graph", "--enable-dp-attention")
    assert parsed.values == {"disable_cuda_graph": True, "enable_dp_attention": True}
    assert parsed.warnings == [
        "'--disable-cuda-graph' is deprecated and will be removed in a future release. "
        "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.",
        "'--enable-dp-attention' is deprecated and will be removed in a future release. "
        "Use '--attn-dp-size <dp-size>' instead.",
    ]
    parsed = _parse("0.5.23", "--monokernel-backend", "amd")
    assert parsed.values == {"enable_amd_monokernel": True}
    assert parsed.warnings
    # 0.5.9's DeprecatedAction stores nothing
    parsed = _parse("0.5.9", "--hybrid-kvcache-ratio")
    assert parsed.values == {} and parsed.errors == []
    assert "deprecated" in parsed.warnings[0]
    assert _parse("0.5.9", "--disable-cuda-graph").warnings == []


def test_mamba_strategy_renamed_without_alias():
    # 0.5.23 renamed the flag and registered no alias for the old spelling.
    assert _parse("0.5.9", "--mamba-scheduler-strategy", "extra_buffer").values == {
        "mamba_scheduler_strategy": "extra_buffer"
    }
    assert _parse("0.5.23", "--mamba-scheduler-strategy", "extra_buffer").unknown == [
        "--mamba-scheduler-strategy"
    ]
    assert _parse("0.5.23", "--mamba-radix-cache-strategy", "extra_buffer").values == {
        "mamba_radix_cache_strategy": "extra_buffer"
    }
    assert _parse("0.5.9", "--mamba-radix-cache-strategy", "x").unknown == [
        "--mamba-radix-cache-strategy"
    ]


def test_positionals_and_double_dash():
    parsed = _parse("0.5.9", "stray", "--tp", "2", "--", "--port", "1")
    assert parsed.positionals == ["stray", "--port", "1"]
    assert parsed.values == {"tp_size": 2}


def test_plain_flags_work_too():
    # parse_argv reads base `Flag`s as well (no item_kind: list items stay strings).
    flags = (
        EngineFlag(names=("--n",), dest="n", kind="int"),
        Flag(names=("--xs",), dest="xs", kind="list"),
        Flag(names=("--off",), dest="on", kind="bool_false"),
    )
    parsed = parse_argv(flags, ["--n", "3", "--xs", "a", "b", "--off"])
    assert parsed.values == {"n": 3, "xs": ["a", "b"], "on": False}


# --------------------------------------------------------------------------------------------
# The tables themselves (CI has no wheels: these read the committed JSON)
# --------------------------------------------------------------------------------------------


def test_versions_and_errors():
    assert available_versions() == VERSIONS
    assert load_flags("v0.5.9") is load_flags("v0.5.9")
    with pytest.raises(EngineVersionError, match="no SGLang flag table for 0.4.0"):
        load_flags("0.4.0")
    with pytest.raises(EngineVersionError, match="not an SGLang release version"):
        load_flags("latest")


@pytest.mark.parametrize("version", VERSIONS)
def test_table_shape(version):
    table = _table(version)
    names = [n for e in table for n in e["names"]]
    assert len(names) == len(set(names)), "an option string is registered twice"
    kinds = {"str", "int", "float", "bool", "bool_false", "json", "list"}
    for e in table:
        assert e["kind"] in kinds
        assert all(n.startswith("--") for n in e["names"])
        assert (e["item_kind"] is not None) == (e["kind"] == "list")


KNOWN = {
    # name: (other spellings, dest, kind, default) -- identical in both versions
    "--model-path": ({"--model"}, "model_path", "str", None),
    "--mem-fraction-static": (set(), "mem_fraction_static", "float", None),
    "--max-running-requests": (set(), "max_running_requests", "int", None),
    "--max-total-tokens": (set(), "max_total_tokens", "int", None),
    "--chunked-prefill-size": (set(), "chunked_prefill_size", "int", None),
    "--max-prefill-tokens": (set(), "max_prefill_tokens", "int", 16384),
    "--context-length": (set(), "context_length", "int", None),
    "--page-size": (set(), "page_size", "int", None),
    "--kv-cache-dtype": (set(), "kv_cache_dtype", "str", "auto"),
    "--disable-radix-cache": (set(), "disable_radix_cache", "bool", False),
    "--disable-overlap-schedule": (set(), "disable_overlap_schedule", "bool", False),
    "--enable-dp-attention": (set(), "enable_dp_attention", "bool", False),
    "--disable-cuda-graph": (set(), "disable_cuda_graph", "bool", False),
    "--speculative-algorithm": (set(), "speculative_algorithm", "str", None),
    "--speculative-num-steps": (set(), "speculative_num_steps", "int", None),
    "--speculative-eagle-topk": (set(), "speculative_eagle_topk", "int", None),
    "--speculative-num-draft-tokens": (set(), "speculative_num_draft_tokens", "int", None),
    "--speculative-draft-model-path": (
        {"--speculative-draft-model"},
        "speculative_draft_model_path",
        "str",
        None,
    ),
    "--max-mamba-cache-size": (set(), "max_mamba_cache_size", "int", None),
    "--mamba-ssm-dtype": (set(), "mamba_ssm_dtype", "str", None),
    "--reasoning-parser": (set(), "reasoning_parser", "str", None),
    "--tool-call-parser": (set(), "tool_call_parser", "str", None),
    "--host": (set(), "host", "str", "127.0.0.1"),
    "--port": (set(), "port", "int", 30000),
    "--trust-remote-code": (set(), "trust_remote_code", "bool", False),
    "--language-only": (set(), "language_only", "bool", False),
    "--quantization": (set(), "quantization", "str", None),
    "--dtype": (set(), "dtype", "str", "auto"),
    "--tp-size": ({"--tensor-parallel-size"}, "tp_size", "int", 1),
    "--pp-size": ({"--pipeline-parallel-size"}, "pp_size", "int", 1),
    "--dp-size": ({"--data-parallel-size"}, "dp_size", "int", 1),
    "--ep-size": ({"--expert-parallel-size", "--ep"}, "ep_size", "int", 1),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_flags(version, name):
    aliases, dest, kind, default = KNOWN[name]
    entry = _by_name(version)[name]
    assert set(entry["names"]) == {name} | aliases
    assert (entry["dest"], entry["kind"], entry["default"]) == (dest, kind, default)


@pytest.mark.parametrize(
    ("version", "name", "dest", "kind", "default", "choices"),
    [
        ("0.5.9", "--mamba-full-memory-ratio", "mamba_full_memory_ratio", "float", 0.9, None),
        ("0.5.23", "--mamba-full-memory-ratio", "mamba_full_memory_ratio", "float", None, None),
        (
            "0.5.9",
            "--mamba-scheduler-strategy",
            "mamba_scheduler_strategy",
            "str",
            "auto",
            ["auto", "no_buffer", "extra_buffer"],
        ),
        (
            "0.5.23",
            "--mamba-radix-cache-strategy",
            "mamba_radix_cache_strategy",
            "str",
            "auto",
            ["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"],
        ),
        ("0.5.9", "--cuda-graph-max-bs", "cuda_graph_max_bs", "int", None, None),
        ("0.5.23", "--cuda-graph-max-bs-decode", "cuda_graph_max_bs_decode", "int", None, None),
        (
            "0.5.9",
            "--enable-piecewise-cuda-graph",
            "enable_piecewise_cuda_graph",
            "bool",
            False,
            None,
        ),
        (
            "0.5.9",
            "--speculative-algorithm",
            "speculative_algorithm",
            "str",
            None,
            ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"],
        ),
        ("0.5.23", "--speculative-algorithm", "speculative_algorithm", "str", None, None),
        (
            "0.5.9",
            "--dtype",
            "dtype",
            "str",
            "auto",
            ["auto", "half", "float16", "bfloat16", "float", "float32"],
        ),
    ],
)
def test_version_specific_flags(version, name, dest, kind, default, choices):
    entry = _by_name(version)[name]
    assert (entry["dest"], entry["kind"], entry["default"], entry["choices"]) == (
        dest,
        kind,
        default,
        choices,
    )


def test_version_differences():
    old, new = _by_name("0.5.9"), _by_name("0.5.23")
    assert old["--tp-size"]["argparse_dest"] == "tensor_parallel_size"  # renamed in from_cli_args
    assert new["--tp-size"]["argparse_dest"] is None
    assert new["--mamba-full-memory-ratio"]["fallback"] == 0.9
    assert new["--disable-cuda-graph"]["deprecated"].startswith("--cuda-graph-backend")
    assert new["--context-length"]["value_parser"] == "human_readable_int"
    for gone in (
        "--mamba-scheduler-strategy",
        "--cuda-graph-max-bs",
        "--cuda-graph-bs",
        "--enable-piecewise-cuda-graph",
    ):
        assert gone in old and gone not in new
    assert (
        "--disable-piecewise-cuda-graph" not in old and "--disable-piecewise-cuda-graph" not in new
    )
    for version in VERSIONS:
        reasoning = _by_name(version)["--reasoning-parser"]["choices"]
        tools = _by_name(version)["--tool-call-parser"]["choices"]
        assert "qwen3" in reasoning and "qwen3_coder" in tools
    assert "auto" in new["--reasoning-parser"]["choices"]
    assert "auto" not in old["--reasoning-parser"]["choices"]


# --------------------------------------------------------------------------------------------
# The committed tables match the extractor (only where the wheels are unzipped)
# --------------------------------------------------------------------------------------------


def _extractor():
    path = REPO / "tools" / "extract_sglang_flags.py"
    spec = importlib.util.spec_from_file_location("extract_sglang_flags", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", VERSIONS)
def test_json_in_sync_with_extractor(version, tmp_path):
    wheel = WHEELS / f"sglang-{version}"
    if not (wheel / "sglang" / "srt" / "server_args.py").is_file():
        pytest.skip(f"unzipped sglang {version} wheel not at {wheel} (set SERVEFIT_SGLANG_WHEELS)")
    tool = _extractor()
    got_version, entries = tool.extract(wheel)
    assert got_version == version
    out = tmp_path / "flags.json"
    tool.write(entries, out)
    committed = REPO / "src/servefit/engines/sglang" / f"flags_{version.replace('.', '_')}.json"
    assert out.read_text() == committed.read_text(), (
        f"regenerate: python tools/extract_sglang_flags.py {wheel}"
    )


# --------------------------------------------------------------------------------------------
# Agreement with CPython's own argparse, on parsers built from the tables
# --------------------------------------------------------------------------------------------

_TYPES = {"int": int, "float": float, "str": str}


def _argparse_for(version: str) -> argparse.ArgumentParser:
    """A real argparse parser with every option string of the table (so prefix matching and
    ambiguity are CPython's), storing only what argv sets."""
    parser = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    for e in _table(version):
        names = e["names"]
        if e["kind"] == "bool":
            parser.add_argument(*names, dest=e["dest"], action="store_true")
        elif e["kind"] == "bool_false":
            parser.add_argument(*names, dest=e["dest"], action="store_false")
        elif e["kind"] == "list":
            parser.add_argument(
                *names,
                dest=e["dest"],
                nargs=e["nargs"],
                choices=e["choices"],
                type=_TYPES.get(e["item_kind"], str),
            )
        else:
            kwargs = {"type": _TYPES.get(e["kind"], str)} if not e["value_parser"] else {}
            if e["nargs"] == "?":
                kwargs.update(nargs="?", const=e["const"])
            if e["choices"] is not None and not e["value_parser"]:
                kwargs["choices"] = e["choices"]
            parser.add_argument(*names, dest=e["dest"], **kwargs)
    return parser


def _plain(e: dict) -> bool:
    return e["action"] in (None, "BooleanOptionalAction") and e["value_parser"] is None


_VALUES = {  # mostly valid, sometimes not
    "int": st.sampled_from(["0", "1", "8", "64", "-3", "x", "2.5"]),
    "float": st.sampled_from(["0.5", "1", "-1.5", "0.88", "1e-3", "x"]),
    "str": st.sampled_from(["a", "auto", "fp8", "x-y", "/m/p"]),
}


@st.composite
def _argv(draw, version: str):
    entries = [e for e in _table(version) if _plain(e)]
    argv: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        e = draw(st.sampled_from(entries))
        name = draw(st.sampled_from(e["names"]))
        if draw(st.integers(0, 5)) == 0:  # an abbreviation, possibly ambiguous
            name = name[: draw(st.integers(3, len(name)))]
        if e["kind"] in ("bool", "bool_false"):
            argv.append(name)
            continue
        kind = e["item_kind"] if e["kind"] == "list" else e["kind"]
        pool = e["choices"] if e["choices"] and draw(st.integers(0, 4)) else None
        value = (
            str(draw(st.sampled_from(pool))) if pool else draw(_VALUES.get(kind, _VALUES["str"]))
        )
        if e["kind"] != "list" and draw(st.booleans()):
            argv.append(f"{name}={value}")
        else:
            argv += [name, value]
    return argv


# Random command lines per release: 60 in the default suite (15 releases x 60 = 900 argvs, about
# a fifth of the time 300 took); SERVEFIT_ARGPARSE_EXAMPLES=300 for a thorough run.
ARGPARSE_EXAMPLES = int(os.environ.get("SERVEFIT_ARGPARSE_EXAMPLES", "60"))


@pytest.mark.parametrize("version", VERSIONS)
def test_agrees_with_cpython_argparse(version):
    parser = _argparse_for(version)
    flags = load_flags(version)

    @settings(max_examples=ARGPARSE_EXAMPLES, deadline=None)
    @given(_argv(version))
    def check(argv):
        ours = parse_argv(flags, argv)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                theirs = vars(parser.parse_args(argv))
        except SystemExit:
            assert ours.errors or ours.unknown or ours.positionals, argv
            return
        assert not ours.errors and not ours.unknown and not ours.positionals, argv
        assert ours.values == theirs, argv

    check()
