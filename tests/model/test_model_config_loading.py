"""load_config: local files, checkpoint dirs, catalog ids, the Hub fallback, bad JSON."""

from __future__ import annotations

import builtins
import json
import math
import sys
import types

import pytest

from servefit import catalog
from servefit.errors import ConfigError
from servefit.model.config import load_config
from servefit.model.inventory import load_model


def test_local_file(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama"}))
    cfg, source = load_config(str(p))
    assert cfg == {"model_type": "llama"}
    assert source == str(p.resolve())


def test_checkpoint_dir(tmp_path):
    (tmp_path / "config.json").write_text('{"a": 1}')
    cfg, source = load_config(str(tmp_path))
    assert cfg == {"a": 1} and source == str(tmp_path.resolve())


def test_dir_without_config(tmp_path):
    with pytest.raises(ConfigError, match="has no config.json"):
        load_config(str(tmp_path))


@pytest.mark.parametrize(
    "ref", ["Qwen/Qwen3.6-27B", "qwen/qwen3.6-27b", "Qwen__Qwen3.6-27B", "Qwen__Qwen3.6-27B.json"]
)
def test_catalog_ids_case_insensitive_and_file_form(ref):
    cfg, source = load_config(ref)
    assert source == "catalog:Qwen/Qwen3.6-27B"
    assert "quantization_config" not in cfg  # the bf16 derivative of the NVFP4 config
    assert cfg["text_config"]["num_hidden_layers"] == 64


def test_infinity_and_nan_tokens_parse(tmp_path):
    # Official Nemotron-H configs contain the bare token Infinity (SOURCES.md note).
    cfg, _ = load_config(str(catalog.find("nvidia/Nemotron-H-56B-Base-8K")))
    assert cfg["time_step_limit"][1] == math.inf
    p = tmp_path / "c.json"
    p.write_text('{"x": NaN, "y": -Infinity}')
    cfg, _ = load_config(str(p))
    assert math.isnan(cfg["x"]) and cfg["y"] == -math.inf


def test_malformed_json_names_file_and_position(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{\n  "hidden_size": 4096,\n  "num_layers": \n}')
    with pytest.raises(ConfigError) as err:
        load_config(str(p))
    msg = str(err.value)
    assert "broken.json" in msg and "line 4 column 1" in msg


def test_top_level_must_be_object(tmp_path):
    p = tmp_path / "list.json"
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        load_config(str(p))


def test_missing_local_json_is_not_sent_to_the_hub():
    with pytest.raises(ConfigError, match="no such file"):
        load_config("does/not/exist.json")


def test_hub_without_huggingface_hub(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "huggingface_hub":
            raise ImportError("no module")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ConfigError) as err:
        load_config("some-org/some-model-that-is-not-bundled")
    msg = str(err.value)
    assert "\n" not in msg
    assert "servefit models" in msg and "local config.json" in msg
    assert "not installed" in msg


def test_hub_offline(monkeypatch):
    def offline(repo_id, filename, **kwargs):
        raise OSError("network unreachable")

    fake = types.ModuleType("huggingface_hub")
    fake.hf_hub_download = offline
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    with pytest.raises(ConfigError) as err:
        load_config("some-org/some-model")
    assert "\n" not in str(err.value) and "servefit models" in str(err.value)


def test_hub_unreachable_fails_fast(monkeypatch):
    calls = []

    def download(repo_id, filename, local_files_only=False):
        calls.append(local_files_only)
        raise FileNotFoundError(filename)

    fake = types.ModuleType("huggingface_hub")
    fake.hf_hub_download = download
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("servefit.model.config.hub_reachable", lambda host, timeout=3.0: False)
    with pytest.raises(ConfigError, match="unreachable"):
        load_config("some-org/some-model")
    assert calls == [True]  # only the cache was asked; no retrying download


def test_hub_download_success(monkeypatch, tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"hidden_size": 1}')

    def download(repo_id, filename, local_files_only=False):
        if local_files_only:  # first call: the local cache, empty here
            raise FileNotFoundError(filename)
        return str(p)

    fake = types.ModuleType("huggingface_hub")
    fake.hf_hub_download = download
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("servefit.model.config.hub_reachable", lambda host, timeout=3.0: True)
    cfg, source = load_config("some-org/some-model")
    assert cfg == {"hidden_size": 1} and source == "hub:some-org/some-model"


def test_load_model_names_catalog_entries():
    spec = load_model("qwen/qwen3.5-27b")
    assert spec.name == "Qwen/Qwen3.5-27B"
    assert spec.source == "catalog:Qwen/Qwen3.5-27B"


# ------------------------------------------------------------------------------ one parse


def test_plan_parses_the_config_once_with_no_hook_per_value(tmp_path, monkeypatch, capsys):
    # plan re-plans the model for its fix suggestions; the file is read and parsed once
    import servefit.validate as validate_module
    from servefit.cli.main import main

    (tmp_path / "config.json").write_text(catalog.find("Qwen/Qwen3-8B").read_text())
    calls: list[dict] = []

    def loads(text, **kwargs):
        calls.append(kwargs)
        return json.loads(text, **kwargs)

    fake_json = types.SimpleNamespace(loads=loads, JSONDecodeError=json.JSONDecodeError)
    monkeypatch.setattr(validate_module, "json", fake_json)
    with pytest.raises(SystemExit) as done:
        main(["plan", "--gpu", "H100", "--engine", "vllm==0.33.0", "--model", str(tmp_path)])
    assert done.value.code == 0, capsys.readouterr().err
    assert calls == [{}]


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(catalog.find("Qwen/Qwen3-8B").read_text())
    first = load_model(str(tmp_path))
    assert load_model(str(tmp_path)) is first
    cfg = json.loads(p.read_text())
    cfg["num_hidden_layers"] = 30
    p.write_text(json.dumps(cfg))
    again = load_model(str(tmp_path))
    assert again is not first and again.num_layers == 30


def test_nesting_is_bounded_by_the_parser_and_named(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="JSON nested 100000 levels deep"):
        load_config(str(p))
    p.write_text('{"a": ' + "[" * 300 + "]" * 300 + "}")  # deep, and within the parser's reach
    value, depth = load_config(str(p))[0]["a"], 1
    while value:
        value, depth = value[0], depth + 1
    assert depth == 300


def test_a_huge_integer_is_refused_with_or_without_the_interpreters_limit(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"hidden_size": ' + "9" * 5000 + "}")
    with pytest.raises(ConfigError, match="an integer of 5000 digits is implausible"):
        load_config(str(p))
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # PYTHONINTMAXSTRDIGITS=0: servefit checks each integer
    try:
        with pytest.raises(ConfigError, match="an integer of 5000 digits is implausible"):
            load_config(str(p))
    finally:
        sys.set_int_max_str_digits(limit)
