"""A stand-in engine process for the launch tests: it is not SGLang or vLLM and runs no model.

    python -m tests.standin.engine --engine sglang|vllm --fault MODE --port N [engine flags...]

It prints the start-up lines an engine prints, in the engine's exact formats (the f-string of
each is cited at the function that prints it), with the minutes of a real start compressed to a
fraction of a second, forks one child per TP rank (as the engines fork scheduler/worker
processes, so stopping must reach the whole process group), then serves the OpenAI-compatible
API through tests/standin/openai_server.py. The numbers it prints are made up, in the range
servefit plans for Qwen3.6-27B at TP 2 on 48 GiB GPUs (SGLANG_NUMBERS); they are not
measurements.

Fault modes (--fault, or STANDIN_FAULT when the stand-in runs behind the `sglang`/`vllm` shims
in tests/standin/shim, whose argv must be the engine's own flags):

none                       starts, serves
slow-weight-load           weight loading takes STANDIN_WEIGHT_LOAD_S seconds (default 2)
startup-oom                SGLang 0.5.9's "Not enough memory" RuntimeError after the weights
                           load, then the engine's own teardown (SIGKILL of itself); vLLM's
                           "No available memory for the cache blocks" ValueError, exit 1
crash-after-first-request  answers one chat completion, then the scheduler dies with a CUDA
                           error and the server kills itself, as SGLang's SIGQUIT handler does
hung-health                /health and /health_generate accept the connection, never answer
port-in-use                another socket already listens on the port when the HTTP server
                           binds (the stand-in holds it itself); the bind error, exit 3
ignore-sigterm             every process ignores SIGTERM: only SIGKILL ends it
exit-when-serving          once it serves (and has started its --escape processes), the main
                           process and its ranks exit 0, as a wrapper script that daemonises
                           its server does

Escapees (--escape KIND[,KIND...], or STANDIN_ESCAPE): processes it starts once it serves that
leave its process group, as daemonising helpers of real engines do. Each holds the listening
socket (the port stays open while it lives), carries the engine's environment (the run's
SERVEFIT_RUN_ID included) and is named in the log: `stand-in escapee KIND pid N`.

daemon                     a double fork with setsid() in between; the middle process exits at
                           once, so the daemon is re-parented (to init, or to the nearest child
                           subreaper)
session                    subprocess.Popen(..., start_new_session=True)
daemon-ignore-sigterm,     the same, ignoring SIGTERM
session-ignore-sigterm

Keys: started with `--api-key` (vLLM: several, or VLLM_API_KEY in its environment) it answers
401 without the key as the engines do (tests/standin/openai_server.py). STANDIN_CONFIG_API_KEY
sets a key the command line does not show, as an engine reads one from its `--config` YAML file
(sglang/srt/server_args_config_parser.py:ConfigArgumentMerger, vLLM's `--config`): SGLang then
logs it among its server_args like any other.

Shut down by SIGTERM, it does what the engine does: SGLang logs the drain and kills its process
tree including itself with SIGKILL (sglang/srt/managers/tokenizer_manager.py:sigterm_watchdog ->
kill_process_tree(os.getpid(), include_parent=True)); vLLM's uvicorn shuts down and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

FAULTS = (
    "none",
    "slow-weight-load",
    "startup-oom",
    "crash-after-first-request",
    "hung-health",
    "port-in-use",
    "ignore-sigterm",
    "exit-when-serving",
)
ESCAPES = ("daemon", "session", "daemon-ignore-sigterm", "session-ignore-sigterm")
# What an escapee runs (exec'd, so nothing of the stand-in's threads is inherited): it sleeps
# until killed, holding the inherited listening socket.
ESCAPEE_CODE = "import time\nwhile True:\n    time.sleep(1)\n"

# Seconds per stage: a real start takes minutes; tests need sub-second ones.
TIMING = {"weights": 0.15, "alloc": 0.05, "graphs": 0.1, "warmup": 0.05}
SLOW_WEIGHT_LOAD_S = 2.0

# What the SGLang stand-in prints (GB = GiB, as SGLang prints them). servefit's plan of the seed
# fix (Qwen3.6-27B, TP 2, A6000, --mem-fraction-static 0.88 --max-running-requests 16) predicts
# 25.48 GiB of weights and 337,294 KV tokens; these stand-in values are within 1.5 % of that.
SGLANG_NUMBERS = {
    "avail_before": 46.92,
    "weights": 25.51,
    "mamba_slots": 16,
    "conv": 0.02,
    "ssm": 1.20,
    "inter_ssm": 4.78,
    "inter_conv": 0.09,
    "kv_tokens": 333712,
    "k": 5.09,
    "v": 5.09,
    "pool_end": 5.24,
    "graph_gib": 0.54,
    "max_running_requests": 16,
    "chunked_prefill_size": 4096,
    "max_prefill_tokens": 16384,
}
VLLM_NUMBERS = {"weights": 25.51, "kv_gib": 10.21, "kv_tokens": 333712, "graph_gib": 0.54}

OOM_SGLANG = (
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: self.server_args.mem_fraction_static={mfs}"
)
OOM_VLLM = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory "
    "reservation on the CPU backend, despite its name). See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)
# A typical CUDA fault of a scheduler process (torch >= 2.8 raises torch.AcceleratorError).
CUDA_FAULT = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"


class Log:
    """Lines in the engine's log format, flushed one by one (the supervisor reads them live)."""

    def __init__(self, engine: str) -> None:
        self.engine = engine

    def _write(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def standin(self, message: str) -> None:
        """A line of the stand-in's own, in no engine's format."""
        self._write(f"stand-in {message}")

    def sglang(self, message: str, rank: int | None = None) -> None:
        # sglang/srt/utils/common.py:configure_logger: f"[%(asctime)s{prefix}] %(message)s",
        # datefmt "%Y-%m-%d %H:%M:%S", prefix f" TP{tp_rank}" in scheduler processes.
        prefix = f" TP{rank}" if rank is not None else ""
        self._write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}{prefix}] {message}")

    def uvicorn(self, level: str, message: str) -> None:
        if self.engine == "sglang":
            # sglang/srt/utils/common.py:set_uvicorn_logging_configs: "[%(asctime)s] %(levelprefix)s
            # %(message)s"; uvicorn/logging.py:ColourizedFormatter.formatMessage: levelprefix =
            # levelname + ":" + " " * (8 - len(levelname))
            pad = " " * (8 - len(level))
            self._write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {level}:{pad} {message}")
        else:
            # vLLM leaves uvicorn's default format: "%(levelprefix)s %(message)s"
            self._write(f"{level}:{' ' * (8 - len(level))} {message}")

    def vllm(self, process: str, pid: int, where: str, message: str, level: str = "INFO") -> None:
        # vllm/logger.py:_FORMAT "(%(vllm_process_name)s pid=%(process)d) %(levelname)s
        # %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s", _DATE_FORMAT "%m-%d %H:%M:%S";
        # vllm/logging_utils/formatter.py:NewLineFormatter repeats the prefix on every line.
        prefix = f"({process} pid={pid}) {level} {time.strftime('%m-%d %H:%M:%S')} [{where}] "
        for line in message.split("\n"):
            self._write(prefix + line)


# ---------------------------------------------------------------------------------- engine flags


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="tests.standin.engine", allow_abbrev=False)
    p.add_argument("--engine", choices=("sglang", "vllm"), default="sglang")
    p.add_argument("--fault", choices=FAULTS, default=os.environ.get("STANDIN_FAULT", "none"))
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--model-path", "--model", dest="model", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument(
        "--tp-size", "--tp", "--tensor-parallel-size", "-tp", dest="tp", type=int, default=1
    )
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--context-length", "--max-model-len", dest="context", type=int, default=32768)
    p.add_argument("--max-running-requests", "--max-num-seqs", dest="mrr", type=int, default=None)
    # SGLang takes one key (ServerArgs.api_key: str); vLLM several (FrontendArgs.api_key: list)
    p.add_argument("--api-key", nargs="+", default=None)
    p.add_argument("--hf-token", default=None)
    p.add_argument("--escape", type=_escapes, default=os.environ.get("STANDIN_ESCAPE", ""))
    p.add_argument("positional", nargs="*")
    return p.parse_known_args(argv)


def _escapes(text: str) -> list[str]:
    kinds = [k for k in text.split(",") if k]
    bad = [k for k in kinds if k not in ESCAPES]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown escapee {bad[0]!r} (one of {', '.join(ESCAPES)})"
        )
    return kinds


def server_args_repr(argv: list[str], **overrides: Any) -> str:
    """The dataclass repr SGLang logs for its ServerArgs: every field, default or given. Fields,
    defaults and flag spellings come from servefit's copy of SGLang 0.5.9's argparse table
    (extracted from the wheel by tools/extract_sglang_flags.py); argv is read like argparse
    would (aliases, unique prefixes such as --speculative-algo)."""
    try:
        from servefit.engines.sglang.flags import load_flags, parse_argv
    except ImportError:  # run by an interpreter without servefit: the given flags, as typed
        pairs = zip(argv, [*argv[1:], None], strict=True)
        values = {a[2:].replace("-", "_"): b for a, b in pairs if a.startswith("--")}
    else:
        flags = load_flags("0.5.9")
        values = {f.dest: f.default for f in flags}
        values.update(parse_argv(flags, argv).values)
    values.update(overrides)
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in values.items()) + ")"


class Engine:
    def __init__(self, args: argparse.Namespace, engine_argv: list[str] | None = None) -> None:
        self.args = args
        self.engine_argv = list(engine_argv or [])
        self.engine = args.engine
        self.fault = args.fault
        self.bind_failed = False
        self.log = Log(self.engine)
        self.model = args.model or (args.positional[0] if args.positional else "stand-in")
        if args.positional and args.positional[0] == "serve" and len(args.positional) > 1:
            self.model = args.positional[1]
        self.served = args.served_model_name or self.model
        self.host = args.host or ("127.0.0.1" if self.engine == "sglang" else "0.0.0.0")
        self.port = args.port or (30000 if self.engine == "sglang" else 8000)
        self.tp = max(1, args.tp)
        self.children: list[int] = []
        self._sessions: list[subprocess.Popen[bytes]] = []
        # vllm/entrypoints/openai/api_server.py:build_app: `args.api_key or [envs.VLLM_API_KEY]`
        keys = list(args.api_key or [])
        if os.environ.get("STANDIN_CONFIG_API_KEY"):  # the config file's key (before the CLI's)
            keys = keys or [os.environ["STANDIN_CONFIG_API_KEY"]]
        if not keys and self.engine == "vllm":
            keys = [os.environ.get("VLLM_API_KEY", "")]
        elif self.engine == "sglang":
            keys = keys[-1:]  # one key (argparse would reject several)
        self.api_keys = tuple(k for k in keys if k)
        self.warm = threading.Event()
        self.server: Any = None
        self.stop = threading.Event()

    # ---- processes

    def fork_ranks(self) -> None:
        """One child per TP rank, idle until killed (schedulers/workers of a real engine)."""
        for _ in range(self.tp):
            pid = os.fork()
            if pid == 0:
                try:
                    while True:
                        time.sleep(1)
                finally:
                    os._exit(0)
            self.children.append(pid)

    def start_escapees(self) -> None:
        """The --escape processes, each holding the listening socket, named in the log."""
        fd = self.server.fileno()
        for kind in self.args.escape:
            pid = (
                self.daemonize(kind, fd)
                if kind.startswith("daemon")
                else self.new_session(kind, fd)
            )
            self.log.standin(f"escapee {kind} pid {pid}")

    def _escapee_argv(self, kind: str) -> list[str]:
        return [sys.executable, "-c", ESCAPEE_CODE, kind]

    def new_session(self, kind: str, fd: int) -> int:
        # SIG_IGN survives fork and exec: set around the spawn, so no SIGTERM can reach the
        # escapee before it ignores it
        ignore = kind.endswith("-ignore-sigterm")
        previous = signal.signal(signal.SIGTERM, signal.SIG_IGN if ignore else signal.SIG_DFL)
        try:
            proc = subprocess.Popen(
                self._escapee_argv(kind),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(fd,),
            )
        finally:
            signal.signal(signal.SIGTERM, previous)
        self._sessions.append(proc)  # never waited for: it outlives this process
        return proc.pid

    def daemonize(self, kind: str, fd: int) -> int:
        """The classic double fork: the daemon's pid comes back through a pipe."""
        read_end, write_end = os.pipe()
        middle = os.fork()
        if middle == 0:
            try:
                os.close(read_end)
                os.setsid()  # a new session and process group: out of the engine's
                daemon = os.fork()
                if daemon == 0:
                    os.set_inheritable(fd, True)
                    ignore = kind.endswith("-ignore-sigterm")
                    signal.signal(signal.SIGTERM, signal.SIG_IGN if ignore else signal.SIG_DFL)
                    argv = self._escapee_argv(kind)
                    os.execv(argv[0], argv)
                os.write(write_end, str(daemon).encode())
            finally:
                os._exit(0)  # the middle process ends at once: the daemon is re-parented
        os.close(write_end)
        with os.fdopen(read_end, "rb") as fh:
            pid = int(fh.read())
        os.waitpid(middle, 0)
        return pid

    def kill_tree_and_self(self) -> None:
        # sglang/srt/utils/common.py:kill_process_tree(parent_pid, include_parent=True): SIGKILL
        # to every child, then to itself.
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def kill_children(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass

    # ---- start-up

    def weight_load_s(self) -> float:
        if self.fault == "slow-weight-load":
            return float(os.environ.get("STANDIN_WEIGHT_LOAD_S", SLOW_WEIGHT_LOAD_S))
        return TIMING["weights"]

    def run(self) -> int:
        if self.fault == "ignore-sigterm":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the rank processes
        self.fork_ranks()
        ok = self.start_sglang() if self.engine == "sglang" else self.start_vllm()
        if not ok:
            # uvicorn's STARTUP_FAILURE (3) after SGLang's bind error; vLLM binds before the engine
            # starts and dies with the OSError's traceback (1); start-up errors exit 1.
            return 3 if self.bind_failed and self.engine == "sglang" else 1
        self.start_escapees()
        if self.fault == "exit-when-serving":
            self.kill_children()
            return 0
        if self.fault != "ignore-sigterm":
            signal.signal(signal.SIGTERM, self.on_sigterm)
        while not self.stop.wait(0.1):
            pass
        return 0

    def start_sglang(self) -> bool:
        log, n, tp = self.log, SGLANG_NUMBERS, self.tp
        mfs = self.args.mem_fraction_static if self.args.mem_fraction_static is not None else 0.85
        # sglang/srt/entrypoints/engine.py:_launch_subprocesses: logger.info(f"{server_args=}")
        key = {"api_key": self.api_keys[0]} if self.api_keys else {}
        log.sglang(f"server_args={server_args_repr(self.engine_argv, **key)}")
        for r in range(tp):
            # sglang/srt/model_executor/model_runner.py:init_torch_distributed
            log.sglang("Init torch distributed begin.", r)
            log.sglang("Init torch distributed ends. elapsed=0.05 s, mem usage=0.09 GB", r)
        for r in range(tp):
            # model_runner.py:load_model f"Load weight begin. avail mem={..:.2f} GB"
            log.sglang(f"Load weight begin. avail mem={n['avail_before']:.2f} GB", r)
        load_s = self.weight_load_s()
        time.sleep(load_s)
        after = n["avail_before"] - n["weights"]
        for r in range(tp):
            # model_runner.py:load_model (0.5.9) "Load weight end. elapsed=.. s, type=.., dtype=..,
            # avail mem=.. GB, mem usage=.. GB."
            log.sglang(
                f"Load weight end. elapsed={load_s:.2f} s, type=Qwen3_5ForConditionalGeneration, "
                f"dtype=torch.bfloat16, avail mem={after:.2f} GB, mem usage={n['weights']:.2f} GB.",
                r,
            )
        if self.fault == "startup-oom":
            self.sglang_scheduler_dies(OOM_SGLANG.format(mfs=mfs), launch_phase=True)
            return False
        time.sleep(TIMING["alloc"])
        for r in range(tp):
            # sglang/srt/mem_cache/memory_pool.py:MambaPool.__init__ (speculative branch)
            log.sglang(
                f"Mamba Cache is allocated. max_mamba_cache_size: {n['mamba_slots']}, "
                f"conv_state size: {n['conv']:.2f}GB, ssm_state size: {n['ssm']:.2f}GB "
                f"intermediate_ssm_state_cache size: {n['inter_ssm']:.2f}GB "
                f"intermediate_conv_window_cache size: {n['inter_conv']:.2f}GB ",
                r,
            )
            # memory_pool.py:KVCache._finalize_allocation_log
            log.sglang(
                f"KV Cache is allocated. #tokens: {n['kv_tokens']}, K size: {n['k']:.2f} GB, "
                f"V size: {n['v']:.2f} GB",
                r,
            )
            # model_runner_kv_cache_mixin.py:init_memory_pool
            log.sglang(f"Memory pool end. avail mem={n['pool_end']:.2f} GB", r)
        for r in range(tp):
            # model_runner.py:init_device_graphs
            log.sglang(
                "Capture cuda graph begin. This can take up to several minutes. "
                f"avail mem={n['pool_end'] - 0.12:.2f} GB",
                r,
            )
        # sglang/srt/model_executor/cuda_graph_runner.py:CudaGraphRunner.__init__
        log.sglang("Capture cuda graph bs [1, 2, 4, 8, 12, 16]", 0)
        time.sleep(TIMING["graphs"])
        end_avail = n["pool_end"] - 0.12 - n["graph_gib"]
        for r in range(tp):
            log.sglang(
                f"Capture cuda graph end. Time elapsed: {TIMING['graphs']:.2f} s. "
                f"mem usage={n['graph_gib']:.2f} GB. avail mem={end_avail:.2f} GB.",
                r,
            )
        # sglang/srt/managers/scheduler.py:Scheduler.__init__ (rank 0 only)
        log.sglang(
            f"max_total_num_tokens={n['kv_tokens']}, chunked_prefill_size={n['chunked_prefill_size']}, "
            f"max_prefill_tokens={n['max_prefill_tokens']}, "
            f"max_running_requests={n['max_running_requests']}, context_len={self.args.context}, "
            f"available_gpu_mem={end_avail:.2f} GB",
            0,
        )
        # uvicorn/server.py:Server._serve "Started server process [%d]";
        # uvicorn/lifespan/on.py:LifespanOn.startup
        log.uvicorn("INFO", f"Started server process [{os.getpid()}]")
        log.uvicorn("INFO", "Waiting for application startup.")
        log.uvicorn("INFO", "Application startup complete.")
        if not self.bind():
            return False
        # uvicorn/server.py:Server._log_started_message
        log.uvicorn(
            "INFO", f"Uvicorn running on http://{self.host}:{self.port} (Press CTRL+C to quit)"
        )
        time.sleep(TIMING["warmup"])
        # sglang/srt/entrypoints/http_server.py:_wait_and_warmup, after its warm-up request
        self.warm.set()
        log.sglang("The server is fired up and ready to roll!")
        return True

    def sglang_scheduler_dies(self, error: str, launch_phase: bool) -> None:
        """A scheduler exception and the teardown that follows it in SGLang 0.5.9."""
        log = self.log
        for r in range(self.tp):
            # sglang/srt/managers/scheduler.py:run_scheduler_process
            # logger.error(f"Scheduler hit an exception: {traceback}"); traceback.format_exc()
            log.sglang(
                "Scheduler hit an exception: Traceback (most recent call last):\n"
                '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", '
                "line 3127, in run_scheduler_process\n"
                "    scheduler = Scheduler(\n"
                f"{error}\n",
                r,
            )
        if launch_phase:
            # sglang/srt/entrypoints/engine.py:_set_envs_and_config launch_phase_sigquit_handler
            log.sglang("Received sigquit from a child process. It usually means the child failed.")
        else:
            # sglang/srt/managers/tokenizer_manager.py:SignalHandler.running_phase_sigquit_handler
            log.sglang(
                "SIGQUIT received. signum=3, frame=<frame at 0x7f3a2c1b5a40, file "
                "'/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py', "
                "line 1966, code launch_server>. It usually means one child failed."
            )
        self.kill_tree_and_self()

    def start_vllm(self) -> bool:
        log, n = self.log, VLLM_NUMBERS
        api, core = os.getpid(), self.children[0]
        worker = "Worker_TP0" if self.tp > 1 else "EngineCore"
        wpid = self.children[0]
        if self.fault == "port-in-use":
            self.hold_port()
        # vllm/entrypoints/utils.py:log_non_default_args "non-default args: %s" (a dict of every
        # argument that differs from its default, secrets included)
        secrets = ""
        if self.args.api_key:
            secrets += f", 'api_key': {self.args.api_key!r}"
        if self.args.hf_token:
            secrets += f", 'hf_token': {self.args.hf_token!r}"
        log.vllm(
            "APIServer",
            api,
            "startup.py:96",
            f"non-default args: {{'model_tag': {self.model!r}, "
            f"'port': {self.port}{secrets}, 'model': {self.model!r}, "
            f"'tensor_parallel_size': {self.tp}}}",
        )
        # vllm/entrypoints/launchers/launcher.py:create_server_socket binds before the engine starts
        try:
            self.server = self.make_server()
        except OSError as exc:
            log.vllm(
                "APIServer",
                api,
                "api_server.py:1",
                "Traceback (most recent call last):\n"
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/launchers/launcher.py", '
                "line 353, in create_server_socket\n    sock.bind(addr)\n"
                f"OSError: [Errno {exc.errno}] {exc.strerror}",
                level="ERROR",
            )
            self.kill_children()
            return False
        # vllm/v1/engine/core.py:EngineCore.__init__ "Initializing a V1 LLM engine (v%s) with config: %s"
        log.vllm(
            "EngineCore",
            core,
            "core.py:140",
            f"Initializing a V1 LLM engine (v0.33.0) with config: model={self.model!r}, "
            f"tensor_parallel_size={self.tp}, max_seq_len={self.args.context}",
        )
        # vllm/v1/worker/gpu_model_runner.py:load_model "Starting to load model %s..."
        log.vllm(
            worker, wpid, "gpu_model_runner.py:4979", f"Starting to load model {self.model}..."
        )
        load_s = self.weight_load_s()
        time.sleep(load_s)
        # vllm/model_executor/model_loader/default_loader.py:load_weights "Loading weights took %.2f seconds"
        log.vllm(
            worker, wpid, "default_loader.py:507", f"Loading weights took {load_s:.2f} seconds"
        )
        # gpu_model_runner.py:load_model "Model loading took %s GiB memory and %.6f seconds" (format_gib: round(x, 2))
        log.vllm(
            worker,
            wpid,
            "gpu_model_runner.py:5089",
            f"Model loading took {n['weights']} GiB memory and {load_s + 0.01:.6f} seconds",
        )
        if self.fault == "startup-oom":
            # vllm/v1/engine/core.py:run_engine_core logger.exception("EngineCore failed to start.")
            log.vllm(
                "EngineCore",
                core,
                "core.py:1584",
                "EngineCore failed to start.\nTraceback (most recent call last):\n"
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_planning.py", '
                "line 58, in _check_enough_kv_cache_memory\n    raise ValueError(\n" + OOM_VLLM,
                level="ERROR",
            )
            # vllm/v1/engine/utils.py:wait_for_engine_startup
            log.vllm(
                "APIServer",
                api,
                "api_server.py:1",
                "RuntimeError: Engine core initialization failed. See root cause above. "
                "Failed core proc(s): {'EngineCore': 1}",
                level="ERROR",
            )
            self.kill_children()
            return False
        time.sleep(TIMING["alloc"])
        # vllm/v1/worker/gpu_worker.py:determine_available_memory "Available KV cache memory: %s GiB"
        log.vllm(worker, wpid, "gpu_worker.py:773", f"Available KV cache memory: {n['kv_gib']} GiB")
        # vllm/v1/core/kv_cache_utils.py:update_kv_cache_capacity
        conc = n["kv_tokens"] / self.args.context
        log.vllm(
            "EngineCore",
            core,
            "kv_cache_utils.py:1149",
            f"GPU KV cache size: {n['kv_tokens']:,} tokens, Maximum concurrency for "
            f"{self.args.context:,} tokens per request: {conc:.2f}x",
        )
        # gpu_model_runner.py:capture_model, tqdm on stderr redrawn with \r
        sys.stdout.write(
            "Capturing CUDA graphs (decode, FULL):   0%|          | 0/35 [00:00<?, ?it/s]\r"
        )
        sys.stdout.flush()
        time.sleep(TIMING["graphs"])
        sys.stdout.write(
            "Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:00<00:00, 350.00it/s]\n"
        )
        log.vllm(
            worker,
            wpid,
            "gpu_model_runner.py:6517",
            f"Graph capturing finished in 0 secs, took {n['graph_gib']:.2f} GiB",
        )
        log.vllm(
            "EngineCore",
            core,
            "core.py:413",
            f"init engine (profile, create kv cache, warmup model) took {TIMING['graphs'] + 0.1:.2f} s",
        )
        # vllm/entrypoints/launchers/api_server/entry.py:build_and_serve
        log.vllm(
            "APIServer",
            api,
            "entry.py:139",
            f"Starting vLLM server on http://{self.host}:{self.port}",
        )
        log.uvicorn("INFO", f"Started server process [{api}]")
        log.uvicorn("INFO", "Waiting for application startup.")
        log.uvicorn("INFO", "Application startup complete.")
        self.warm.set()
        self.serve()
        return True

    # ---- HTTP

    def hold_port(self) -> None:
        """Another server already listening on the port (what a leftover launch leaves)."""
        self._holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._holder.bind((self.host, self.port))
        self._holder.listen(1)

    def make_server(self) -> Any:
        from tests.standin.openai_server import make_server

        server = make_server(
            self.host, self.port, model=self.served, engine=self.engine, api_keys=self.api_keys
        )
        server.RequestHandlerClass = _faulty_handler(server.RequestHandlerClass, self)
        return server

    def bind(self) -> bool:
        if self.fault == "port-in-use":
            self.hold_port()
        try:
            self.server = self.make_server()
        except OSError as exc:
            self.bind_failed = True  # the port's holder: this stand-in (port-in-use) or another
            # uvicorn/server.py:Server.startup logs the OSError of asyncio's create_server
            # (asyncio/base_events.py: "error while attempting to bind on address %r: %s"),
            # shuts the lifespan down and exits with STARTUP_FAILURE (3).
            msg = f"error while attempting to bind on address {(self.host, self.port)!r}: {exc.strerror.lower()}"
            self.log.uvicorn("ERROR", f"[Errno {exc.errno}] {msg}")
            self.log.uvicorn("INFO", "Waiting for application shutdown.")
            self.log.uvicorn("INFO", "Application shutdown complete.")
            self.kill_children()
            return False
        self.serve()
        return True

    def serve(self) -> None:
        threading.Thread(target=self.server.serve_forever, name="http", daemon=True).start()

    def crash_soon(self) -> None:
        def crash() -> None:
            time.sleep(0.05)  # the answer leaves first, as the engine's own response did
            if self.engine == "sglang":
                self.sglang_scheduler_dies(CUDA_FAULT, launch_phase=False)
            # vllm/v1/engine/core.py:EngineCore.run_busy_loop logger.exception("EngineCore encountered a fatal error.")
            self.log.vllm(
                "EngineCore",
                self.children[0],
                "core.py:2806",
                "EngineCore encountered a fatal error.\nTraceback (most recent call last):\n"
                + CUDA_FAULT,
                level="ERROR",
            )
            self.kill_tree_and_self()

        threading.Thread(target=crash, daemon=True).start()

    def on_sigterm(self, signum: int, frame: Any) -> None:
        if self.engine == "sglang":
            # sglang/srt/entrypoints/http_server.py / tokenizer_manager.py: SignalHandler.sigterm_handler
            self.log.sglang(
                f"SIGTERM received. signum={signum} frame={frame}. Draining requests and shutting down..."
            )
            # tokenizer_manager.py:sigterm_watchdog (sleeps 5 s per round; compressed here)
            time.sleep(0.05)
            self.log.sglang(
                "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]."
            )
            self.kill_tree_and_self()
        # uvicorn/server.py:Server.shutdown, uvicorn/lifespan/on.py:LifespanOn.shutdown
        self.log.uvicorn("INFO", "Shutting down")
        self.log.uvicorn("INFO", "Waiting for application shutdown.")
        self.log.uvicorn("INFO", "Application shutdown complete.")
        self.log.uvicorn("INFO", f"Finished server process [{os.getpid()}]")
        self.kill_children()
        self.stop.set()


def _faulty_handler(base: type, engine: Engine) -> type:
    class Handler(base):  # type: ignore[misc, valid-type]
        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/health_generate"):
                if engine.fault == "hung-health":
                    self.server.stopping.wait(3600)
                    return
                if not engine.warm.is_set():
                    # sglang/srt/entrypoints/http_server.py:health_generate: 503 while
                    # ServerStatus.Starting (before the warm-up request is done)
                    self._send_text(503, "")
                    return
            super().do_GET()

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            super().do_POST()
            path = self.path.split("?", 1)[0]
            if engine.fault == "crash-after-first-request" and path == "/v1/chat/completions":
                engine.crash_soon()

    return Handler


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, _unknown = parse(argv)
    return Engine(args, argv).run()


if __name__ == "__main__":
    sys.exit(main())
