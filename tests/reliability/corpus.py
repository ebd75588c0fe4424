"""The bad-input corpus: inputs to every command, each with the class of answer it must get.

ERROR    bad input: exit 2 and one clear line (`servefit: error: ...`, or click's own usage
         error for an option it parses itself), never a traceback or an internal error
RESULT   an answer (exit 0 or 1): a plan, a predicted failure, a report
WARNING  an answer (exit 0 or 1) that says what it assumed (the needle)

`{d}` in an argument is the directory tests/reliability/test_bad_input_corpus.py fills with
the files below (configs, checkpoints, logs, special files). Every case names what it checks
in its id. Sources of the numbers: the bundled catalog configs (servefit/catalog/data), the
repository's real logs (tests/doctor/logs), and hand-made damage to both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from servefit.catalog import find

ERROR, RESULT, WARNING = "error", "result", "warning"


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    expect: str
    needle: str = ""  # must appear in what the user reads (stdout + stderr)
    code: int | None = None  # the exact exit status, when the class allows two


def _catalog(name: str) -> dict:
    return json.loads(find(name).read_text())  # type: ignore[union-attr]


DENSE = _catalog("Qwen/Qwen3-8B")  # 32 heads, 8 KV heads, 36 layers
MOE = _catalog("Qwen/Qwen3-30B-A3B")  # 128 experts, 8 per token
HYBRID = _catalog("Qwen/Qwen3.5-27B")  # text_config: 48 GDN + 16 attention layers
SWA = _catalog("openai/gpt-oss-20b")  # 24 layers, sliding and full marked in layer_types


def _with(base: dict, *path_value: tuple[str, object]) -> dict:
    cfg = json.loads(json.dumps(base))
    for path, value in path_value:
        node = cfg
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        if value is _DROP:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return cfg


_DROP = object()

# file name -> JSON text of a config that is damaged in one way (written by the test)
CONFIGS: dict[str, str] = {
    # the cases
    "kv_not_dividing.json": json.dumps(_with(DENSE, ("num_key_value_heads", 5))),
    "kv_more_than_heads.json": json.dumps(_with(DENSE, ("num_key_value_heads", 64))),
    "topk_above_experts.json": json.dumps(_with(MOE, ("num_experts_per_tok", 999))),
    "arch_empty.json": json.dumps(_with(DENSE, ("architectures", []))),
    "arch_unknown.json": json.dumps(_with(DENSE, ("architectures", ["FooForCausalLM"]))),
    "arch_not_a_list.json": json.dumps(_with(DENSE, ("architectures", "LlamaForCausalLM"))),
    "quant_unknown.json": json.dumps(
        _with(DENSE, ("quantization_config", {"quant_method": "foo-quant", "bits": 4}))
    ),
    "gptq_0_bits.json": json.dumps(
        _with(DENSE, ("quantization_config", {"quant_method": "gptq", "bits": 0}))
    ),
    "gptq_5_bits.json": json.dumps(
        _with(DENSE, ("quantization_config", {"quant_method": "gptq", "bits": 5}))
    ),
    "awq_3_bits.json": json.dumps(
        _with(DENSE, ("quantization_config", {"quant_method": "awq", "bits": 3}))
    ),
    "quant_config_a_list.json": json.dumps(_with(DENSE, ("quantization_config", [1, 2]))),
    "mtp_at_the_guard.json": json.dumps(
        _with(HYBRID, ("text_config.mtp_num_hidden_layers", 1 << 40))
    ),
    "hidden_zero.json": json.dumps(_with(DENSE, ("hidden_size", 0))),
    "hidden_negative.json": json.dumps(_with(DENSE, ("hidden_size", -4096))),
    "hidden_fraction.json": json.dumps(_with(DENSE, ("hidden_size", 4096.5))),
    "hidden_string.json": json.dumps(_with(DENSE, ("hidden_size", "4096"))),
    "hidden_bool.json": json.dumps(_with(DENSE, ("hidden_size", True))),
    "hidden_null.json": json.dumps(_with(DENSE, ("hidden_size", None))),
    "hidden_missing.json": json.dumps(_with(DENSE, ("hidden_size", _DROP))),
    "hidden_2_pow_41.json": json.dumps(_with(DENSE, ("hidden_size", 1 << 41))),
    "layers_zero.json": json.dumps(_with(DENSE, ("num_hidden_layers", 0))),
    "layers_million.json": json.dumps(_with(DENSE, ("num_hidden_layers", 10**6))),
    "heads_zero.json": json.dumps(_with(DENSE, ("num_attention_heads", 0))),
    "head_dim_zero.json": json.dumps(_with(DENSE, ("head_dim", 0))),
    "vocab_zero.json": json.dumps(_with(DENSE, ("vocab_size", 0))),
    "intermediate_negative.json": json.dumps(_with(DENSE, ("intermediate_size", -1))),
    "max_position_zero.json": json.dumps(_with(DENSE, ("max_position_embeddings", 0))),
    "dtype_int3.json": json.dumps(_with(DENSE, ("torch_dtype", "int3"))),
    "dtype_number.json": json.dumps(_with(DENSE, ("torch_dtype", 16))),
    "rope_scaling_string.json": json.dumps(_with(DENSE, ("rope_scaling", "yarn"))),
    "experts_zero.json": json.dumps(_with(MOE, ("num_experts", 0))),
    "experts_huge.json": json.dumps(_with(MOE, ("num_experts", 1 << 41))),
    "text_config_a_list.json": json.dumps(_with(HYBRID, ("text_config", [1]))),
    "vision_config_a_list.json": json.dumps(_with(HYBRID, ("vision_config", [1]))),
    "linear_heads_missing.json": json.dumps(
        _with(HYBRID, ("text_config.linear_num_value_heads", _DROP))
    ),
    "layer_types_short.json": json.dumps(_with(SWA, ("layer_types", ["sliding_attention"] * 3))),
    "layer_types_unknown.json": json.dumps(_with(SWA, ("layer_types", ["teleport"] * 24))),
    # Qwen3.5: SGLang reads full_attention_interval and ignores layer_types (layer_plan.py)
    "layer_types_ignored.json": json.dumps(
        _with(HYBRID, ("text_config.layer_types", ["teleport"] * 3))
    ),
    "nan_in_a_size.json": json.dumps(DENSE).replace('"hidden_size": 4096', '"hidden_size": NaN'),
    "infinity_size.json": json.dumps(DENSE).replace(
        '"hidden_size": 4096', '"hidden_size": Infinity'
    ),
    "integer_5000_digits.json": json.dumps(DENSE).replace(
        '"hidden_size": 4096', '"hidden_size": ' + "9" * 5000
    ),
    "nested_100000.json": "[" * 100_000 + "]" * 100_000,
    "not_an_object.json": "[1, 2, 3]",
    "empty.json": "",
    "invalid.json": '{"hidden_size": 4096,,}',
    "nan_only.json": "NaN",
    "string_only.json": '"a config"',
}
# raw bytes that are not UTF-8
BINARY = {"not_utf8.json": b'{"architectures": ["\xff\xfe"]}', "nul_bytes.json": b"\0" * 64}

PLAN = ("plan", "--gpu", "H100", "--engine", "sglang==0.5.9", "--format", "json")
PLAN23 = ("plan", "--gpu", "H100", "--engine", "sglang==0.5.23", "--format", "json")
VPLAN = ("plan", "--gpu", "H100", "--engine", "vllm==0.33.0", "--format", "json")
Q8 = ("-m", "Qwen/Qwen3-8B")


def _config_cases() -> list[Case]:
    errors = {
        "kv_not_dividing.json": "is not a multiple of num_key_value_heads 5",
        "kv_more_than_heads.json": "num_key_value_heads 64 exceeds num_attention_heads 32",
        "topk_above_experts.json": "num_experts_per_tok 999 exceeds the 128 routed experts",
        "arch_not_a_list.json": "architectures must be a list",
        "mtp_at_the_guard.json": "mtp_num_hidden_layers is implausibly large",
        "hidden_zero.json": "hidden_size must be positive",
        "hidden_negative.json": "hidden_size must be positive",
        "hidden_fraction.json": "hidden_size must be an integer",
        "hidden_string.json": "hidden_size must be an integer",
        "hidden_bool.json": "hidden_size must be an integer",
        "hidden_null.json": "hidden_size",
        "hidden_missing.json": "hidden_size",
        "hidden_2_pow_41.json": "implausibly large",
        "layers_zero.json": "num_hidden_layers",
        "layers_million.json": "implausibly large",
        "heads_zero.json": "num_attention_heads must be positive",
        "head_dim_zero.json": "head_dim",
        "vocab_zero.json": "vocab_size must be positive",
        "intermediate_negative.json": "intermediate_size must be positive",
        "max_position_zero.json": "max_position_embeddings must be positive",
        "dtype_int3.json": "unsupported dtype",
        "dtype_number.json": "unsupported dtype",
        "experts_huge.json": "implausibly large",
        "text_config_a_list.json": "text_config",
        "vision_config_a_list.json": "vision_config must be an object",
        "linear_heads_missing.json": "linear_num_value_heads",
        "layer_types_short.json": "layer_types",
        "layer_types_unknown.json": "teleport",
        "nan_in_a_size.json": "hidden_size must be an integer",
        "infinity_size.json": "hidden_size must be an integer",
        "integer_5000_digits.json": "an integer of 5000 digits is implausible",
        "nested_100000.json": "nested 100000 levels deep",
        "not_an_object.json": "expected a JSON object",
        "empty.json": "invalid JSON",
        "invalid.json": "invalid JSON at line 1",
        "nan_only.json": "expected a JSON object",
        "string_only.json": "expected a JSON object",
        "not_utf8.json": "is not UTF-8",
        "nul_bytes.json": "invalid JSON",
    }
    out = [
        Case(f"plan-config-{name}", (*PLAN, "-m", "{d}/" + name), ERROR, needle)
        for name, needle in errors.items()
    ]
    fails = {  # the engine refuses them: a predicted failure with its own text
        "arch_empty.json": "does not register",
        "arch_unknown.json": "does not register FooForCausalLM",
        "gptq_0_bits.json": "ZeroDivisionError: Fraction(32, 0)",
        "gptq_5_bits.json": "only 2/3/4/8-bit weight quantization is supported for GPTQ",
        "awq_3_bits.json": "only 4-bit weight quantization is supported for AWQ",
    }
    out += [
        Case(f"plan-config-{name}", (*PLAN, "-m", "{d}/" + name), RESULT, needle, code=1)
        for name, needle in fails.items()
    ]
    out += [
        Case(
            "plan-config-quant_unknown.json",
            (*PLAN, "-m", "{d}/quant_unknown.json"),
            WARNING,
            "'foo-quant' is not one servefit knows",
        ),
        Case(
            "plan-config-quant_config_a_list.json",
            (*PLAN, "-m", "{d}/quant_config_a_list.json"),
            RESULT,
        ),
        Case(
            "plan-config-rope_scaling_string.json",
            (*PLAN, "-m", "{d}/rope_scaling_string.json"),
            RESULT,
        ),
        Case("plan-config-experts_zero.json", (*PLAN, "-m", "{d}/experts_zero.json"), RESULT),
        Case(
            "plan-config-layer_types_ignored.json",
            (*PLAN, "-m", "{d}/layer_types_ignored.json"),
            RESULT,
            code=0,
        ),
    ]
    # the same damaged configs through the other engines and commands: never a crash
    for name in ("kv_not_dividing.json", "nested_100000.json", "integer_5000_digits.json"):
        out += [
            Case(f"vllm-config-{name}", (*VPLAN, "-m", "{d}/" + name), ERROR),
            Case(f"sglang23-config-{name}", (*PLAN23, "-m", "{d}/" + name), ERROR),
            Case(
                f"explain-config-{name}",
                ("explain", "--gpu", "H100", "--format", "json", "-m", "{d}/" + name),
                ERROR,
            ),
            Case(
                f"fit-config-{name}",
                ("fit", "{d}/" + name, "--gpu", "H100", "--num-gpus", "1", "--context", "4096"),
                ERROR,
            ),
        ]
    return out


def _path_cases() -> list[Case]:
    paths = {
        "unknown-user": ("~nosuchuser/config.json", "user 'nosuchuser' is not known"),
        "too-long": ("/tmp/" + "a/" * 3000, "the path is too long"),
        "long-component": ("/tmp/" + "a" * 300, "a path component is too long"),
        "fifo": ("{d}/fifo", "is a FIFO"),
        "dev-zero": ("/dev/zero", "is a device or socket"),
        "dir-without-config": ("{d}/empty_dir", "has no config.json"),
        "dir-config-is-a-dir": ("{d}/config_is_dir", "is a directory, not a config file"),
        "through-a-file": ("{d}/plain.txt/config.json", "no such file or directory"),
        "nonexistent": ("/nonexistent/config.json", "no such file or directory"),
        "symlink-loop": ("{d}/loop", "Too many levels of symbolic links"),
        "empty": ("", "no model"),
        "spaces": ("   ", "no model"),
    }
    return [
        Case(f"plan-model-path-{k}", (*PLAN, "-m", p), ERROR, needle)
        for k, (p, needle) in paths.items()
    ]


def _checkpoint_cases() -> list[Case]:
    bad = {
        "ckpt_negative_offsets": "data_offsets",
        "ckpt_span_mismatch": "but its offsets span",
        "ckpt_overlap": "overlaps",
        "ckpt_gap": "leaves a gap",
        "ckpt_short_buffer": "the file holds",
        "ckpt_unknown_dtype": "unknown dtype",
        "ckpt_negative_shape": "dims must be non-negative",
        "ckpt_one_of_five": "checkpoint incomplete: 1 of 5 shards",
        "ckpt_index_missing_shard": "names missing shard",
        "ckpt_index_traversal": "outside the checkpoint directory",
        "ckpt_index_not_utf8": "is not UTF-8",
        "ckpt_index_nested": "levels deep",
        "ckpt_header_huge": "implausible",
        "ckpt_truncated_header": "ends inside its",
    }
    out = [Case(f"plan-{k}", (*PLAN, "-m", "{d}/" + k), ERROR, needle) for k, needle in bad.items()]
    out.append(Case("plan-ckpt_valid", (*PLAN, "-m", "{d}/ckpt_valid"), RESULT))
    return out


def _number_cases() -> list[Case]:
    out = []
    values = {
        "nan": "must be a finite number",
        "inf": "must be a finite number",
        "-inf": "must be a finite number",
        "1e400": "must be a finite number",
        "0": "must be positive",
        "-1": "must be positive",
        "1e300": "must be at most",
        "abc": "must be a number",
        "": "must be a number",
    }
    for opt in ("--free-gib", "--measured-free-before-gib", "--measured-weights-gib"):
        for v, needle in values.items():
            out.append(Case(f"plan{opt}={v or 'empty'}", (*PLAN, *Q8, opt, v), ERROR, needle))
    ints = {
        "--gpu-mem-mib": {
            "0": "must be positive",
            "-5": "must be positive",
            "100000000000000000000000": "must be at most 16777216",
            "1e23": "must be an integer",
            "80.5": "must be an integer",
            "9" * 5000: "must be an integer",
        },
        "--num-gpus": {
            "0": "must be positive",
            "100000000000000000000": "must be at most 65536",
            "1e20": "must be an integer",
            "two": "must be an integer",
        },
    }
    for opt, cases in ints.items():
        for v, needle in cases.items():
            out.append(Case(f"plan{opt}={v[:12]}", (*PLAN, *Q8, opt, v), ERROR, needle))
    return out


def _engine_flag_cases() -> list[Case]:
    """Engine flags: what the engine's argparse refuses is its own failure (exit 1); values it
    accepts but no plan can use are bad input (exit 2)."""
    refused = [
        ("sglang==0.5.9", ("--tp-size", "two"), "--tp-size expects an int, got 'two'"),
        ("sglang==0.5.9", ("--speculative-algorithm", "BOGUS"), "invalid choice 'BOGUS'"),
        ("sglang==0.5.9", ("--dtype", "int3"), "invalid choice 'int3'"),
        ("sglang==0.5.9", ("--tp-szie", "2"), "unrecognized arguments: --tp-szie 2"),
        ("sglang==0.5.9", ("--mem-fraction-static", "lots"), "expects a float, got 'lots'"),
        (
            "sglang==0.5.23",
            ("--speculative-algorithm", "BOGUS"),
            "Unknown speculative algorithm name: BOGUS",
        ),
        ("sglang==0.5.23", ("--attn-dp-size", "0"), "--attn-dp-size must be positive (got 0)"),
        ("sglang==0.5.23", ("--cuda-graph-max-bs", "8"), "ambiguous option"),
        ("sglang==0.5.23", ("--context-length", "32Kx"), "--context-length"),
        ("vllm==0.33.0", ("--max-num-seqs", "lots"), "expects an int, got 'lots'"),
        ("vllm==0.24.0", ("--kv-cache-dtype", "int3"), "invalid choice"),
        ("vllm==0.33.0", ("--tp", "2"), "unrecognized arguments"),
    ]
    out = [
        Case(
            f"plan-engine-flag-{engine}{'-'.join(flags)[:40]}",
            ("plan", "--gpu", "H100", "--engine", engine, "--format", "json", *Q8, *flags),
            RESULT,
            needle,
            code=1,
        )
        for engine, flags, needle in refused
    ]
    bad = [
        ("sglang==0.5.9", ("--mem-fraction-static", "nan"), "--mem-fraction-static"),
        ("sglang==0.5.9", ("--mem-fraction-static", "inf"), "--mem-fraction-static"),
        ("sglang==0.5.9", ("--mem-fraction-static", "0"), "--mem-fraction-static"),
        ("sglang==0.5.9", ("--mem-fraction-static", "1.5"), "--mem-fraction-static"),
        ("sglang==0.5.9", ("--mamba-full-memory-ratio", "nan"), "must be a finite number"),
        ("sglang==0.5.9", ("--mamba-full-memory-ratio", "inf"), "must be a finite number"),
        ("sglang==0.5.9", ("--cuda-graph-max-bs", "1000000000000"), "--cuda-graph-max-bs"),
        ("sglang==0.5.9", ("--tp-size", "0"), "--tp-size"),
        ("vllm==0.33.0", ("--kv-cache-dtype", "int3"), "does not size --kv-cache-dtype int3"),
        ("sglang==0.5.9", ("--context-length", "-5"), "--context-length"),
        ("sglang==0.5.9", ("--max-running-requests", "0"), "--max-running-requests"),
        ("sglang==0.5.9", ("--chunked-prefill-size", "0"), "--chunked-prefill-size"),
        ("sglang==0.5.9", ("--page-size", "0"), "--page-size"),
        (
            "sglang==0.5.23",
            ("--cuda-graph-max-bs-decode", "1000000000000"),
            "--cuda-graph-max-bs-decode",
        ),
        ("vllm==0.33.0", ("--gpu-memory-utilization", "nan"), "must be a finite number"),
        ("vllm==0.33.0", ("--tensor-parallel-size", "0"), "tensor"),
    ]
    out += [
        Case(
            f"plan-engine-value-{engine}{'-'.join(flags)[:40]}",
            ("plan", "--gpu", "H100", "--engine", engine, "--format", "json", *Q8, *flags),
            ERROR,
            needle,
        )
        for engine, flags, needle in bad
    ]
    # values the engine takes and a plan can follow, however odd: an answer, never a crash
    odd = [
        ("sglang==0.5.9", ("--chunked-prefill-size", "1000000000000")),
        ("sglang==0.5.23", ("--chunked-prefill-size", "1000000000000")),
        ("sglang==0.5.9", ("--max-running-requests", "1000000000000")),
        ("sglang==0.5.23", ("--max-total-tokens", "1")),
        ("sglang==0.5.9", ("--context-length", "1000000000")),
        ("sglang==0.5.9", ("--random-seed", str(1 << 62))),
        ("vllm==0.33.0", ("--max-model-len", "1")),
        ("vllm==0.33.0", ("--max-num-seqs", "1000000000000")),
        ("vllm==0.33.0", ("--kv-cache-memory-bytes", "1")),
        ("sglang==0.5.9", ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1000")),
        ("sglang==0.5.9", ("--tp-size", "99999999999999999999")),  # does not divide the heads
    ]
    out += [
        Case(
            f"plan-engine-odd-{engine}{'-'.join(flags)[:40]}",
            ("plan", "--gpu", "H100", "--engine", engine, "--format", "json", *Q8, *flags),
            RESULT,
        )
        for engine, flags in odd
    ]
    return out


def _impossible_plans() -> list[Case]:
    return [
        Case(  # used to say STARTS with -108 GiB free
            "plan-bundled-gpt-oss-pp3",
            ("plan", "--gpu", "H100", "--engine", "sglang==0.5.9", "--format", "json",
             "-m", "openai/gpt-oss-20b", "--pp-size", "3", "--max-running-requests", "16"),
            RESULT,
            "CUDA out of memory allocating the kv cache",
            code=1,
        ),
        Case(  # used to show a -50.95 GiB state pool of -708 slots
            "plan-bundled-qwen3-next-a6000",
            ("plan", "--gpu", "A6000", "--engine", "sglang==0.5.9", "--format", "json",
             "-m", "Qwen/Qwen3-Next-80B-A3B-Thinking"),
            RESULT,
            "CUDA out of memory while loading the weights",
            code=1,
        ),
    ]  # fmt: skip


def _other_plan_cases() -> list[Case]:
    return [
        Case("plan-gpu-unknown", ("plan", "--gpu", "A6001", *Q8), ERROR, "unknown GPU"),
        Case("plan-gpu-empty", ("plan", "--gpu", "", *Q8), ERROR),
        Case("plan-no-gpu", ("plan", *Q8), ERROR, "no GPU"),
        Case("plan-no-model", ("plan", "--gpu", "H100"), ERROR, "no model"),
        Case("plan-engine-banana", ("plan", "--gpu", "H100", "--engine", "sglang==banana", *Q8), ERROR),
        Case("plan-engine-unknown", ("plan", "--gpu", "H100", "--engine", "tgi==1.0", *Q8), ERROR),
        Case("plan-engine-future", ("plan", "--gpu", "H100", "--engine", "vllm==99.0", *Q8), WARNING, "unverified"),
        Case("plan-env-no-equals", ("plan", "--gpu", "H100", *Q8, "--env", "NOEQ"), ERROR, "KEY=VALUE"),
        Case("plan-format-bogus", ("plan", "--gpu", "H100", *Q8, "--format", "xml"), ERROR),
        Case("plan-compare-bogus", ("plan", "--gpu", "H100", *Q8, "--compare", "tgi==1"), ERROR),
        Case("plan-launch-ls", ("plan", "--gpu", "H100", "--", "ls", "-la"), ERROR),
        Case("plan-launch-empty", ("plan", "--gpu", "H100", "--"), ERROR),
        Case(
            "plan-launch-engine-mismatch",
            ("plan", "--gpu", "H100", "--engine", "vllm==0.33.0", "--", "python", "-m",
             "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"),
            ERROR,
            "launch command runs sglang",
        ),
        Case(
            "plan-launch-unbalanced-quote",
            ("plan", "--gpu", "H100", "--", "python", "-m", "sglang.launch_server",
             "--model-path", "Qwen/Qwen3-8B", "--json-model-override-args", "{not json"),
            RESULT,
        ),
    ]  # fmt: skip


def _explain_fit_cases() -> list[Case]:
    E = ("explain", "--gpu", "H100", "--format", "json", *Q8)
    F = ("fit", "Qwen/Qwen3-8B", "--gpu", "H100", "--format", "json")
    return [
        Case("explain-min-free-nan", (*E, "--min-free-gib", "nan"), ERROR, "finite"),
        Case("explain-min-free-negative", (*E, "--min-free-gib", "-1"), ERROR, "zero or more"),
        Case("explain-concurrency-zero", (*E, "--concurrency", "0"), ERROR, "must be positive"),
        Case("explain-concurrency-huge", (*E, "--concurrency", "1" + "0" * 30), ERROR, "at most"),
        Case("explain-html-dir", (*E, "--html", "{d}"), ERROR, "is a directory"),
        Case("explain-html-nowhere", (*E, "--html", "/nonexistent/x.html"), ERROR, "no such directory"),
        Case("explain-html-fifo", (*E, "--html", "{d}/fifo"), ERROR, "FIFO"),
        Case("fit-context-zero", (*F, "--num-gpus", "1", "--context", "0"), ERROR, "positive"),
        Case("fit-context-huge", (*F, "--num-gpus", "1", "--context", "1e12"), ERROR, "integer"),
        Case("fit-num-gpus-huge", (*F, "--num-gpus", "100000000", "--context", "4096"), ERROR, "at most"),
        Case("fit-nodes-zero", (*F, "--num-gpus", "1", "--nodes", "0", "--context", "4096"), ERROR),
        Case("fit-top-zero", (*F, "--num-gpus", "1", "--context", "4096", "--top", "0"), ERROR),
        Case("fit-spec-steps-zero", (*F, "--num-gpus", "1", "--context", "4096", "--spec-steps", "0"), ERROR),
        Case("fit-free-nan", (*F, "--num-gpus", "1", "--context", "4096", "--free-gib", "nan"), ERROR),
        Case("fit-min-free-inf", (*F, "--num-gpus", "1", "--context", "4096", "--min-free-gib", "inf"), ERROR),
        Case("fit-gpu-mem-zero", (*F, "--num-gpus", "1", "--context", "4096", "--gpu-mem-mib", "0"), ERROR),
        Case("fit-spec-bogus", (*F, "--num-gpus", "1", "--context", "4096", "--spec", "bogus"), ERROR),
        Case("fit-no-context", (*F, "--num-gpus", "1"), ERROR, "--context"),
        Case(
            "fit-baseline-refused",
            ("fit", "--gpu", "H100", "--context", "4096", "--", "python", "-m",
             "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp-size", "two"),
            RESULT,
            "expects an int",
            code=1,
        ),
        Case(
            "explain-tiny-gpu",
            ("explain", "--gpu", "H100", "--gpu-mem-mib", "1", "--format", "json", *Q8),
            ERROR,
            "nothing left before weights",
        ),
        Case("fit-tiny-gpu", (*F, "--num-gpus", "1", "--context", "4096", "--gpu-mem-mib", "1"), RESULT),
    ]  # fmt: skip


LOGS = "tests/doctor/logs"


def _doctor_cases() -> list[Case]:
    D = ("doctor", "--format", "json")
    seed = f"{LOGS}/sglang_0_5_9_seed_085_fail.log"
    return [
        Case("doctor-fifo", (*D, "{d}/fifo"), ERROR, "is a FIFO"),
        Case("doctor-dev-zero", (*D, "/dev/zero"), ERROR, "device or socket"),
        Case("doctor-directory", (*D, "{d}"), ERROR, "is a directory"),
        Case("doctor-nonexistent", (*D, "/nonexistent/x.log"), ERROR, "no such log file"),
        Case("doctor-unknown-user", (*D, "~nosuchuser/x.log"), ERROR, "is not known"),
        Case("doctor-too-long", (*D, "/tmp/" + "a/" * 3000), ERROR, "too long"),
        Case("doctor-empty-file", (*D, "{d}/empty.log"), RESULT, "no engine start-up", code=1),
        Case("doctor-binary", (*D, "{d}/binary.log"), RESULT, code=1),
        Case("doctor-torn-mem", (*D, "{d}/torn.log"), WARNING, "could not be read and were skipped"),
        Case("doctor-400-digits", (*D, "{d}/digits.log"), WARNING, "could not be read and were skipped"),
        Case("doctor-seed-torn", (*D, "{d}/seed_torn.log"), WARNING, "could not be read and were skipped"),
        Case("doctor-huge-line", (*D, "{d}/huge_line.log"), RESULT, code=1),
        Case("doctor-no-newline", (*D, "{d}/no_newline.log"), RESULT),
        Case("doctor-not-utf8", (*D, "{d}/latin1.log"), RESULT),
        Case("doctor-interleaved", (*D, "{d}/interleaved.log"), RESULT),
        Case("doctor-since-huge", (*D, seed, "--since", "1000000000d"), ERROR, "--since"),
        Case("doctor-since-garbage", (*D, seed, "--since", "yesterday-ish"), ERROR, "--since"),
        Case("doctor-since-25h", (*D, seed, "--since", "25:61"), ERROR, "--since"),
        Case("doctor-since-year-0", (*D, seed, "--since", "0000-01-01 00:00"), ERROR, "--since"),
        Case("doctor-since-future", (*D, seed, "--since", "2999-01-01 00:00"), RESULT, "stale", code=1),
        Case("doctor-command-ls", (*D, seed, "--command", "ls -la"), ERROR, "not an SGLang or vLLM launch"),
        Case("doctor-command-unbalanced", (*D, seed, "--command", "python -m sglang.launch_server 'x"), ERROR),
        Case("doctor-engine-bogus", (*D, seed, "--engine", "sglang==banana"), ERROR),
        Case("doctor-gpu-bogus", (*D, seed, "--gpu", "A6001"), ERROR),
        Case("doctor-model-fifo", (*D, seed, "-m", "{d}/fifo"), ERROR, "is a FIFO"),
        Case("doctor-model-bad-config", (*D, seed, "-m", "{d}/kv_not_dividing.json"), ERROR),
        Case("doctor-format-bogus", ("doctor", seed, "--format", "xml"), ERROR),
    ]  # fmt: skip


def _verify_cases() -> list[Case]:
    return [
        Case("verify-bad-ipv6", ("verify", "http://[::1"), ERROR, "not a valid URL"),
        Case("verify-ftp", ("verify", "ftp://x"), ERROR, "not an http:// or https:// URL"),
        Case("verify-no-host", ("verify", "http://"), ERROR, "names no host"),
        Case("verify-port-range", ("verify", "http://host:99999"), ERROR, "not a valid URL"),
        Case("verify-space", ("verify", "http://a b"), ERROR, "whitespace"),
        Case("verify-long-label", ("verify", "http://" + "a" * 70 + ".com"), ERROR, "63 characters"),
        Case("verify-no-url", ("verify",), ERROR, "give the server's URL"),
        Case("verify-timeout-nan", ("verify", "http://127.0.0.1:9", "--timeout", "nan"), ERROR, "finite"),
        Case("verify-timeout-zero", ("verify", "http://127.0.0.1:9", "--timeout", "0"), ERROR),
        Case("verify-deadline-inf", ("verify", "http://127.0.0.1:9", "--deadline", "inf"), ERROR, "finite"),
        Case("verify-deadline-zero", ("verify", "http://127.0.0.1:9", "--deadline", "0"), ERROR),
        Case("verify-max-tokens-huge", ("verify", "http://127.0.0.1:9", "--max-tokens", "1e12"), ERROR),
        Case("verify-tp-zero", ("verify", "http://127.0.0.1:9", "--gpu", "H100", "--tp", "0"), ERROR),
        Case("verify-config-without-gpu", ("verify", "http://127.0.0.1:9", "--config", "x"), ERROR, "give --gpu"),
        Case("verify-gpu-bogus", ("verify", "http://127.0.0.1:9", "--gpu", "A6001"), ERROR),
        Case("verify-config-fifo", ("verify", "http://127.0.0.1:9", "--gpu", "H100", "--config", "{d}/fifo"), ERROR, "FIFO"),
        Case("verify-reference-bad", ("verify", "http://127.0.0.1:9", "--reference", "http://[::1"), ERROR),
        Case("verify-skip-bogus", ("verify", "http://127.0.0.1:9", "--skip", "bogus"), ERROR),
        Case(  # nothing listens on port 9 here: a failed liveness check, at once
            "verify-refused",
            ("verify", "http://127.0.0.1:9", "--timeout", "2", "--deadline", "10", "--format", "json"),
            RESULT,
            "cannot connect",
            code=1,
        ),
    ]  # fmt: skip


def _launch_cases() -> list[Case]:
    cmd = ("--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B")
    L = ("launch", "--gpu", "H100", "--runs-dir", "{d}/runs")
    return [
        Case("launch-runs-dir-file", ("launch", "--runs-dir", "/etc/passwd", *cmd), ERROR, "is not a directory"),
        Case("launch-runs-dir-under-file", ("launch", "--runs-dir", "{d}/plain.txt/runs", *cmd), ERROR),
        Case("launch-runs-dir-user", ("launch", "--runs-dir", "~nosuchuser/runs", *cmd), ERROR, "is not known"),
        Case("launch-settle-nan", (*L, "--settle", "nan", *cmd), ERROR, "finite"),
        Case("launch-settle-inf", (*L, "--settle", "inf", *cmd), ERROR, "finite"),
        Case("launch-settle-huge", (*L, "--settle", "1e300", *cmd), ERROR, "at most"),
        Case("launch-grace-inf", (*L, "--grace", "inf", *cmd), ERROR, "finite"),
        Case("launch-grace-negative", (*L, "--grace", "-1", *cmd), ERROR, "zero or more"),
        Case("launch-ready-timeout-zero", (*L, "--ready-timeout", "0", *cmd), ERROR, "positive"),
        Case("launch-probe-timeout-nan", (*L, "--probe-timeout", "nan", *cmd), ERROR),
        Case("launch-probe-interval-zero", (*L, "--probe-interval", "0", *cmd), ERROR),
        Case("launch-health-path-bogus", (*L, "--health-path", "/x", *cmd), ERROR),
        Case("launch-no-command", L, ERROR, "no launch command"),
        Case("launch-free-nan", (*L, "--free-gib", "nan", *cmd), ERROR, "finite"),
        Case("stop-runs-dir-file", ("stop", "--runs-dir", "/etc/passwd"), ERROR, "is not a directory"),
        Case("stop-grace-nan", ("stop", "--runs-dir", "{d}/runs", "--grace", "nan"), ERROR, "finite"),
        Case("stop-port-timeout-zero", ("stop", "--runs-dir", "{d}/runs", "--port-timeout", "0"), ERROR),
        Case("stop-unknown-run", ("stop", "--runs-dir", "{d}/runs", "nosuchrun"), ERROR),
        Case("stop-nothing", ("stop", "--runs-dir", "{d}/runs_empty"), RESULT, "no run is running", code=0),
        Case("runs-runs-dir-file", ("runs", "--runs-dir", "/etc/passwd"), ERROR, "is not a directory"),
        Case("runs-last-negative", ("runs", "--runs-dir", "{d}/runs", "--last", "-1"), ERROR),
        Case("runs-last-huge", ("runs", "--runs-dir", "{d}/runs", "--last", "1e9"), ERROR),
        Case("runs-empty", ("runs", "--runs-dir", "{d}/runs_empty"), RESULT, "no runs under", code=0),
        Case("runs-too-long", ("runs", "--runs-dir", "/tmp/" + "a/" * 3000), ERROR, "too long"),
        Case("logs-runs-dir-file", ("logs", "--runs-dir", "/etc/passwd"), ERROR, "is not a directory"),
        Case("logs-lines-negative", ("logs", "--runs-dir", "{d}/runs", "-n", "-1"), ERROR),
        Case("logs-no-runs", ("logs", "--runs-dir", "{d}/runs_empty"), ERROR, "no runs under"),
    ]  # fmt: skip


def _log_shape_cases() -> list[Case]:
    """The seed's failing log as logrotate, PowerShell and old editors leave it: every shape
    gives the plain file's root cause (written by test_bad_input_corpus.py:_log_shapes)."""
    D = ("doctor", "--format", "json")
    same = "Not enough memory"
    shapes = [
        "seed.log.gz",
        "seed.log.xz",
        "seed.log.bz2",
        "seed.log.zst",
        "seed.log.lzma",
        "seed_utf16le_bom.log",
        "seed_utf16be_bom.log",
        "seed_utf16le.log",
        "seed_utf8_bom.log",
        "seed_cr.log",
        "seed_crlf.log",
        "seed_named.txt.gz",
        "seed_gz_named.log",
        "seed_progress_cr.log",
        "seed_concatenated.log.gz",
    ]
    out = [Case(f"doctor-shape-{n}", (*D, "{d}/" + n), RESULT, same, code=1) for n in shapes]
    out += [
        Case("doctor-shape-gzip-cut", (*D, "{d}/seed_cut.log.gz"), WARNING, "breaks off", code=1),
        Case("doctor-shape-gzip-garbage", (*D, "{d}/garbage.gz"), ERROR, "gzip"),
        Case("doctor-shape-gzip-empty", (*D, "{d}/empty.log.gz"), RESULT, "no engine start-up", code=1),
        Case("doctor-shape-gzip-bomb", (*D, "{d}/bomb.log.gz"), RESULT, code=1),
        Case("doctor-shape-gzip-of-binary", (*D, "{d}/binary.log.gz"), RESULT, code=1),
        Case("doctor-shape-utf16-odd-byte", (*D, "{d}/seed_utf16_odd.log"), RESULT, same, code=1),
    ]  # fmt: skip
    return out


# The launch as the engine reads it: environment prefixes and the engines' --config files
# ({d}/*.yaml written by test_bad_input_corpus.py:_launch_configs). Engine texts from
# servefit/engines/devices.py and configfile.py, which cite the wheels.
SGL = ("--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B")
VLLM = ("--", "vllm", "serve", "Qwen/Qwen3-8B")


def _whole_launch_cases() -> list[Case]:
    S = ("plan", "--gpu", "H100", "--engine", "sglang==0.5.23", "--format", "json")
    V = ("plan", "--gpu", "H100", "--engine", "vllm==0.33.0", "--format", "json")
    cvd = lambda value: ("--", f"CUDA_VISIBLE_DEVICES={value}")  # noqa: E731
    return [
        Case("env-cvd-one-for-tp2-sglang", (*S, *cvd("0"), *SGL[1:], "--tp-size", "2"), RESULT, "invalid device ordinal", code=1),
        Case("env-cvd-one-for-tp2-vllm", (*V, *cvd("0"), *VLLM[1:], "-tp", "2"), RESULT, "World size (2) is larger than the number of available GPUs (1)", code=1),
        Case("env-cvd-empty-vllm", (*V, *cvd(""), *VLLM[1:]), RESULT, "out of bounds for 0 devices", code=1),
        Case("env-cvd-repeated-vllm", (*V, *cvd("0,0"), *VLLM[1:], "-tp", "2"), RESULT, "0 GPUs", code=1),
        Case("env-cvd-negative-ends-list", (*V, *cvd("0,-1,1"), *VLLM[1:], "-tp", "2"), RESULT, "available GPUs (1)", code=1),
        Case("env-cvd-two-for-tp2", (*S, *cvd("0,1"), *SGL[1:], "--tp-size", "2"), RESULT, code=0),
        Case("env-cvd-via-env-wrapper", (*V, "--", "env", "CUDA_VISIBLE_DEVICES=3", *VLLM[1:], "-tp", "2"), RESULT, "available GPUs (1)", code=1),
        Case("env-cvd-exported-before", (*V, "--", "export CUDA_VISIBLE_DEVICES=0 && vllm serve Qwen/Qwen3-8B -tp 2"), RESULT, "available GPUs (1)", code=1),
        Case("config-vllm-tp-from-file", (*V, *VLLM, "--config", "{d}/tp2_util08.yaml"), RESULT, code=0),
        Case("config-vllm-file-too-big-for-cvd", (*V, *cvd("0"), *VLLM[1:], "--config", "{d}/tp2_util08.yaml"), RESULT, "World size (2)", code=1),
        Case("config-vllm-malformed", (*V, *VLLM, "--config", "{d}/malformed.yaml"), ERROR, "is not valid YAML"),
        Case("config-vllm-missing", (*V, *VLLM, "--config", "{d}/nonexistent.yaml"), ERROR, "cannot read the file"),
        Case("config-vllm-a-list", (*V, *VLLM, "--config", "{d}/a_list.yaml"), RESULT, "not a mapping", code=1),
        Case("config-vllm-not-yaml-name", (*V, *VLLM, "--config", "{d}/plain.txt"), RESULT, "must be of a yaml/yml type", code=1),
        Case("config-vllm-no-file-after", (*V, *VLLM, "--config"), RESULT, code=1),
        Case("config-vllm-a-directory", (*V, *VLLM, "--config", "{d}/yaml_dir.yaml"), ERROR),
        Case("config-vllm-fifo", (*V, *VLLM, "--config", "{d}/fifo.yaml"), ERROR),
        Case("config-vllm-unknown-key", (*V, *VLLM, "--config", "{d}/unknown_key.yaml"), RESULT, "unrecognized arguments", code=1),
        Case("config-vllm-empty", (*V, *VLLM, "--config", "{d}/empty.yaml"), RESULT, code=1),
        Case("config-vllm-equals-is-ignored", (*V, *VLLM, "--config={d}/tp2_util08.yaml"), WARNING, "never read"),
        Case("config-vllm-yaml-bomb", (*V, *VLLM, "--config", "{d}/billion_laughs.yaml"), ERROR, "aliases expand"),
        Case("config-sglang-a-list", (*S, *SGL, "--config", "{d}/a_list.yaml"), RESULT, "must contain a dictionary at root level", code=1),
        Case("config-sglang-tp-from-file", (*S, *SGL, "--config", "{d}/sglang_tp2.yaml"), RESULT, code=0),
        Case("config-sglang-malformed", (*S, *SGL, "--config", "{d}/malformed.yaml"), ERROR, "is not valid YAML"),
        Case("config-sglang-not-utf8", (*S, *SGL, "--config", "{d}/not_utf8.yaml"), ERROR),
    ]  # fmt: skip


def _host_cases() -> list[Case]:
    """verify's host as users paste it: full-width (an IME), IDN; nothing listens on port 9."""
    T = ("--timeout", "2", "--deadline", "10", "--format", "json")
    return [
        Case("verify-full-width-host", ("verify", "http://１２７．０．０．１:9", *T), RESULT, "cannot connect", code=1),
        Case("verify-full-width-port", ("verify", "http://127.0.0.1:９", *T), RESULT, "cannot connect", code=1),
        Case("verify-full-width-localhost", ("verify", "http://ｌｏｃａｌｈｏｓｔ:9", *T), RESULT, "cannot connect", code=1),
        Case("verify-full-width-slash-in-host", ("verify", "http://evil．com／x:9"), ERROR),
        Case("verify-idn-host", ("verify", "http://bücher.invalid:9", *T), RESULT, code=1),
        Case("verify-idn-unencodable", ("verify", "http://" + "ü" * 70 + ".com:9"), ERROR),
    ]  # fmt: skip


def _catalog_cases() -> list[Case]:
    return [
        Case("models-format-bogus", ("models", "--format", "xml"), ERROR),
        Case("gpus-format-bogus", ("gpus", "--format", "xml"), ERROR),
        Case("unknown-command", ("plna",), ERROR),
        Case("models-json", ("models", "--format", "json"), RESULT, code=0),
        Case("gpus-json", ("gpus", "--format", "json"), RESULT, code=0),
    ]


CASES: tuple[Case, ...] = tuple(
    _config_cases()
    + _path_cases()
    + _checkpoint_cases()
    + _number_cases()
    + _engine_flag_cases()
    + _impossible_plans()
    + _other_plan_cases()
    + _explain_fit_cases()
    + _doctor_cases()
    + _verify_cases()
    + _launch_cases()
    + _catalog_cases()
    + _log_shape_cases()
    + _whole_launch_cases()
    + _host_cases()
)
