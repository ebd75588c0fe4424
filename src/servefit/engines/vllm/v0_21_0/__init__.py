"""vLLM 0.21.0 profile (pip download --no-deps vllm==0.21.0); docs/engines/vllm-0.21.0.md.

The shared flow (profile.py: resolve.py, planning.py) with this release's rules (rules.py, a
diff against the previous profile's); PROFILE is declared on first use (lazy.py)."""

from servefit.engines.vllm.lazy import profile_getattr

__getattr__ = profile_getattr(__name__)
