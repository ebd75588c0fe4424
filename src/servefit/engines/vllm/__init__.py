"""vLLM profiles: one package per mirrored release (v0_24_0/, v0_33_0/), rules both agree on in
common.py, the `vllm serve` flag tables in flags_<version>.json. docs/engines/vllm-<version>.md."""
