"""vLLM profiles: one package per group of releases that size alike (v0_10_0/ ... v0_33_0/, the
registry maps each release to one), each a rules module subclassing the previous profile's;
rules every release agrees on in common.py; the `vllm serve` flag tables in
flags_<profile>.json, the registered architectures in archs_<release>.txt.
docs/engines/vllm-<profile>.md."""
