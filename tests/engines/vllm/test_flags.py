"""The `vllm serve` flag tables (extracted from the wheels by tools/extract_vllm_flags.py) and
the reader that applies vLLM's FlexibleArgumentParser rules. Expected values are read off the
wheels' sources, cited per test (paths inside the wheel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.engines.vllm.flags import (
    available_versions,
    human_readable_int,
    load_flags,
    parse_argv,
)

WHEELS = Path("/work/wheels")


def flag(version: str, name: str):
    return next(f for f in load_flags(version) if name in f.names)


def test_both_mirrored_versions_have_tables():
    assert {"0.24.0", "0.33.0"} <= set(available_versions())


@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
def test_engine_args_extracted_as_the_wheel_registers_them(version):
    # arg_utils.py:EngineArgs.add_cli_args: parallel_group.add_argument("--tensor-parallel-size",
    # "-tp", **parallel_kwargs["tensor_parallel_size"]); ParallelConfig.tensor_parallel_size: int = 1
    tp = flag(version, "--tensor-parallel-size")
    assert tp.names == ("--tensor-parallel-size", "-tp") and tp.dest == "tensor_parallel_size"
    assert tp.kind == "int" and tp.default == 1
    # CacheConfig.gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)
    assert flag(version, "--gpu-memory-utilization").default == 0.92
    # _compute_kwargs: max_model_len -> human_readable_int_or_auto; max_num_batched_tokens -> human_readable_int
    assert flag(version, "--max-model-len").value_parser == "human_readable_int_or_auto"
    assert flag(version, "--max-num-batched-tokens").value_parser == "human_readable_int"
    # bool fields -> argparse.BooleanOptionalAction: --x and --no-x
    assert flag(version, "--no-enable-prefix-caching").kind == "bool_false"
    # `vllm serve MODEL`: make_arg_parser adds the positional "model_tag" (nargs "?")
    assert flag(version, "model_tag").positional
    # the --kv-cache-dtype flag reads CacheConfig.cache_dtype into EngineArgs.kv_cache_dtype
    assert flag(version, "--kv-cache-dtype").dest == "kv_cache_dtype"


def test_version_differences_in_the_tables():
    # 0.24.0 cache.py: MambaCacheMode = Literal["all", "align", "none"]; 0.33.0: ["align", "none"]
    assert flag("0.24.0", "--mamba-cache-mode").choices == ("align", "all", "none")
    assert flag("0.33.0", "--mamba-cache-mode").choices == ("align", "none")
    # 0.33.0 registers the --device-memory-utilization alias
    assert "--device-memory-utilization" in flag("0.33.0", "--gpu-memory-utilization").names
    assert not any("--device-memory-utilization" in f.names for f in load_flags("0.24.0"))
    # 0.24.0 CacheDType is a Literal (choices); 0.33.0 types it CacheDType | str (no choices)
    assert "fp8_e5m2" in flag("0.24.0", "--kv-cache-dtype").choices
    assert flag("0.33.0", "--kv-cache-dtype").choices is None


def test_human_readable_int_like_vllm():
    # vllm/utils/argparse_utils.py:human_readable_int docstring: 1k -> 1,000; 1K -> 1,024; 25.6k -> 25,600
    assert human_readable_int("1k") == 1000
    assert human_readable_int("1K") == 1024
    assert human_readable_int("25.6k") == 25600
    assert human_readable_int("32768") == 32768


def test_flexible_parser_rules():
    flags = load_flags("0.33.0")
    p = parse_argv(
        flags,
        [
            "Qwen/Qwen3.6-27B",
            "--max_model_len",
            "32k",
            "-tp",
            "2",
            "--no-enable-prefix-caching",
            "--speculative-config.method",
            "mtp",
            "--speculative-config.num_speculative_tokens",
            "3",
            "--gpu-memory-util",
            "0.9",
            "--port",
            "8000",
        ],
    )
    assert p.errors == []
    assert p.values["model_tag"] == "Qwen/Qwen3.6-27B"  # the positional
    assert p.values["max_model_len"] == 32000  # underscores -> dashes; "32k" = 32,000
    assert p.values["tensor_parallel_size"] == 2
    assert p.values["enable_prefix_caching"] is False
    # dotted JSON keys build one dict, values parsed as JSON when they are
    assert p.values["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert p.values["gpu_memory_utilization"] == 0.9  # unambiguous prefix (allow_abbrev)


def test_auto_max_model_len_and_optional_none():
    flags = load_flags("0.24.0")
    p = parse_argv(flags, ["--max-model-len", "auto", "--mamba-block-size", "None"])
    assert p.values["max_model_len"] == -1  # human_readable_int_or_auto
    assert p.values["mamba_block_size"] is None  # optional_type: "None" -> None


def test_bad_values_are_one_line_errors_and_unknown_flags_are_listed():
    flags = load_flags("0.33.0")
    p = parse_argv(flags, ["--max-num-seqs", "many", "--made-up-flag", "3"])
    assert p.errors == ["argument --max-num-seqs: expects an int, got 'many'"]
    assert p.unknown == ["--made-up-flag"]
    p = parse_argv(flags, ["--mamba-ssm-cache-dtype", "int4"])
    assert p.errors and p.errors[0].startswith("argument --mamba-ssm-cache-dtype: invalid choice")


@pytest.mark.skipif(
    not (WHEELS / "vllm-0.33.0" / "vllm").is_dir(), reason="unzipped wheels not here"
)
@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
def test_committed_table_matches_a_fresh_extraction(version):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
    from extract_vllm_flags import extract

    got_version, entries = extract(WHEELS / f"vllm-{version}")
    table = (
        Path(__file__).resolve().parents[3]
        / "src/servefit/engines/vllm"
        / f"flags_{version.replace('.', '_')}.json"
    )
    assert got_version == version
    assert entries == json.loads(table.read_text())


def test_lever_flags_are_the_engines_spellings():
    from servefit.engines.vllm.levers import LEVERS, args_for, flag_for

    # every lever's attribute is a real `vllm serve` destination in both releases
    for version in ("0.24.0", "0.33.0"):
        dests = {f.dest for f in load_flags(version)}
        for lever in LEVERS:
            assert lever.dest in dests or lever.dest == "num_speculative_tokens", lever.dest
    assert flag_for(load_flags("0.33.0"), "gpu_memory_utilization") == "--gpu-memory-utilization"
    assert flag_for(load_flags("0.24.0"), "enable_prefix_caching") == "--enable-prefix-caching"
    spec = next(lv for lv in LEVERS if lv.dest == "num_speculative_tokens")
    resolved = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 3}}
    assert args_for(spec, 2, resolved) == {
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 2}
    }


@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
@pytest.mark.parametrize(
    "argv",
    [["-dp=8"], ["-tp=2", "-pp=2"], ["-dp", "8", "-q=fp8"], ["-dpx=8"], ["-tp2"]],
)
def test_single_dash_inline_values_as_cpython_argparse_reads_them(version, argv):
    # The expected reading is CPython's own argparse given the same option strings: its
    # ArgumentParser._parse_optional splits "-dp=8" at "=" when "-dp" is an option (vLLM's
    # FlexibleArgumentParser passes single-dash tokens through unchanged, only -O is rewritten).
    import argparse

    flags = load_flags(version)
    wanted = ("data_parallel_size", "tensor_parallel_size", "pipeline_parallel_size")
    reference = argparse.ArgumentParser(exit_on_error=False)
    for f in flags:
        if f.dest in wanted:
            reference.add_argument(*f.names, dest=f.dest, type=int)
        elif f.dest == "quantization":
            reference.add_argument(*f.names, dest=f.dest)
    known, extra = reference.parse_known_args(argv)
    expected = {k: v for k, v in vars(known).items() if v is not None}

    parsed = parse_argv(flags, argv)
    assert parsed.errors == []
    assert parsed.values == expected
    assert parsed.unknown == extra


@pytest.mark.parametrize(
    ("release", "profile", "flag"),
    [
        # each release's own table (tools/extract_vllm_flags.py on its wheel) has a flag its
        # profile's release lacks; the profile is kept for sizing (engines/registry.py)
        ("0.10.1", "0.10.0", "--mamba-ssm-cache-dtype"),
        ("0.10.1.1", "0.10.0", "--h11-max-header-count"),
        ("0.11.0", "0.10.2", "--enable-dbo"),
        ("0.16.0", "0.15.0", "--enable-flashinfer-autotune"),
        ("0.21.0", "0.20.1", "--safetensors-prefetch-num-threads"),
    ],
)
def test_a_release_reads_its_own_flags_where_its_profile_reads_others(release, profile, flag):
    from servefit.engines import registry

    argv = ["x", flag, "1"] if "max" in flag or "threads" in flag else ["x", flag]
    if flag == "--mamba-ssm-cache-dtype":
        argv = ["x", flag, "float32"]
    own = registry.select(f"vllm=={release}")[0].parse_argv(argv)
    assert not own.unknown, own
    other = registry.select(f"vllm=={profile}")[0].parse_argv(argv)
    assert other.unknown == [flag]
