"""Test shim standing in for the `sglang` package (see ../README.md); not SGLang."""
