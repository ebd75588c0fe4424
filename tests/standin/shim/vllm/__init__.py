"""Test shim standing in for the `vllm` package (see ../README.md); not vLLM."""
