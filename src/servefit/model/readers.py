"""Config readers: the code an engine release reads config.json with, and what each refuses.

No engine reads config.json alone. transformers' config class for the model type parses it
first: vLLM builds its `hf_config` with it, and SGLang's get_config calls
AutoConfig.from_pretrained before it re-parses the file with its own class
(sglang/srt/utils/hf_transformers/config.py:HfModelConfigParser.parse, 0.5.9:
hf_transformers_utils.py:get_config; its own classes only win AutoConfig where transformers
has none, utils/hf_transformers/common.py registers them bare). Then the engine's own config
and quantization classes read the fields, and the memory pool is sized from them.

A field one reader refuses another may read past, so a `ConfigIssue` records the refusal of
each reader that raises, and a `note` for every plan of the config: what the engines make of
the field, so that an engine which reads past it is never planned silently. An engine release
names the readers it runs (engines/sglang/profile.py:config_readers, the vLLM releases'
`Rules.CONFIG_READERS`) and refuses what the first of them refuses (its Profile.check_model).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from servefit.frozen import frozen


def transformers(version: str) -> str:
    """The reader id of a transformers release's config classes ("transformers==5.19.0")."""
    return f"transformers=={version}"


# SGLang's own config classes (sglang/srt/configs/): 0.5.9's, and 0.5.10's on.
SGLANG_0_5_9_CONFIGS = "sglang-0.5.9-configs"
SGLANG_CONFIGS = "sglang-configs"
# SGLang's quantization parsing (configs/model_config.py:ModelConfig._parse_quant_hf_config and
# _verify_quantization), the same in every release from 0.5.9 to 0.5.23.
SGLANG_QUANT = "sglang-quant"
# ModelOptFp8Config.from_config, which every unknown ModelOpt quant_algo reaches:
# "static FP8" text up to 0.5.17, "regular FP8" text from 0.5.18.
SGLANG_MODELOPT_STATIC_FP8 = "sglang-modelopt-static-fp8"
SGLANG_MODELOPT_REGULAR_FP8 = "sglang-modelopt-regular-fp8"
# The KV pool sized by dividing by the bytes per token, which is 0 when no layer keeps a KV
# cache: model_runner_kv_cache_mixin.py:ModelRunnerKVCacheMixin.profile_max_num_token (0.5.9,
# 0.5.10), pool_configurator.py:DefaultPoolConfigurator.calculate_pool_sizes (0.5.11 to
# 0.5.16); 0.5.17 sizes such a pool from the context length instead (_zero_kv_max_tokens).
SGLANG_KV_DIVIDES_BY_CELL = "sglang-kv-divides-by-cell-size"
# GPTQConfig / AWQConfig with their `Fraction(32, bits)` and 4-bit-only checks: SGLang's
# (layers/quantization/gptq.py, awq.py; gptq/, awq/ from 0.5.13), and vLLM's before 0.33.
GPTQ_AWQ_CLASSIC = "gptq-awq-classic"
# vLLM 0.33.0's quantization classes: AutoGPTQConfig, AutoAWQConfig, the ModelOpt configs, and
# model_arch_config_convertor.py:_normalize_quantization_config.
VLLM_QUANT_0_33 = "vllm-0.33-quant"


@frozen
class ConfigIssue:
    """One field of a config the engines read differently or refuse.

    `refusals`: (reader, the error it stops with), in the order the engine runs the readers
    (transformers first); `note`: the warning the plan carries whatever the engine, None when
    every engine release refuses the config anyway."""

    field: str
    refusals: tuple[tuple[str, str], ...] = ()
    note: str | None = None

    def refusal(self, readers: Collection[str]) -> str | None:
        for reader, text in self.refusals:
            if reader in readers:
                return text
        return None


def config_refusal(issues: Iterable[ConfigIssue], readers: Collection[str]) -> str | None:
    """What the first of `readers` to refuse one of `issues` stops with, None when none does."""
    for issue in issues:
        text = issue.refusal(readers)
        if text is not None:
            return text
    return None


def config_notes(issues: Iterable[ConfigIssue]) -> list[str]:
    """The issues' warnings, in order."""
    return [i.note for i in issues if i.note]
