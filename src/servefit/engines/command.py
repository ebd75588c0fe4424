"""Recognise a pasted launch command and split it into engine, engine argv and environment.

    parse_launch_command(
        "CUDA_VISIBLE_DEVICES=0,1 nohup python3 -m sglang.launch_server --tp 2 > log 2>&1 &"
    ) -> LaunchCommand(engine="sglang", argv=["--tp", "2"], env={"CUDA_VISIBLE_DEVICES": "0,1"},
                       entrypoint="python -m sglang.launch_server")

Understood around the engine invocation: leading `NAME=value` assignments, `export NAME=value`
commands before it (`export A=1 && python ...`), `env [-i] NAME=value ...`, the wrappers
`nohup`, `exec`, `time`, `setsid`, `stdbuf -oL`, `nice -n N`; a Python interpreter by any path
(`python`, `python3.11`, `/venv/bin/python3`) with interpreter options before `-m`; and shell
redirections (`> log`, `2>&1`, `&> log`), `&`, `;`, `&&`, `||`, `|` after or around it.

Entrypoints: `python -m sglang.launch_server`, `sglang serve` (both 0.5.9 and 0.5.23 ship it),
`python -m vllm.entrypoints.openai.api_server`, `vllm serve [MODEL]`. For `vllm serve MODEL`
the model stays in `argv` as vLLM's positional `model_tag`.

A string is tokenised like a POSIX shell (quotes, backslash escapes and line continuations;
no expansion of `$VARS`). A list is taken as already split: redirections and separators are
then recognised only as whole tokens (`>`, `2>&1`, `>log`, `&`, `&&`).

The launch is the whole launch: `argv` is what the engine's parser reads, with a
`--config FILE` merged in as the engine merges it (engines/configfile.py; the file read from
the current directory, secret values masked; `written_argv` keeps the words as typed), and
`env` holds the variables the engine starts with, including the GPU visibility ones
(CUDA_VISIBLE_DEVICES, ...) that bound the GPUs it can use (engines/devices.py).
`env -u NAME` and `env -i` are kept in `unset` / `inherit_env`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from servefit.errors import ArgumentError
from servefit.frozen import frozen

__all__ = ["LaunchCommand", "parse_launch_command"]

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_SEPARATORS = {";", "&", "&&", "||", "|", "|&", "\n"}
_REDIRECT = re.compile(r"^(\d*|&)(>&|<&|>>|>\||<<|>|<)(.*)$", re.S)
# python options that take a separate argument (`python -W ignore -m ...`)
_PYTHON_OPTS_WITH_ARG = {"-W", "-X", "--check-hash-based-pycs"}

_SGLANG_MODULES = {"sglang.launch_server"}
_VLLM_MODULES = {"vllm.entrypoints.openai.api_server"}


@frozen
class LaunchCommand:
    engine: str  # "sglang" | "vllm"
    argv: list[str]  # the engine's own arguments, a --config FILE merged in
    env: dict[str, str] = field(default_factory=dict)  # assignments in front of / before it
    entrypoint: str = ""  # how it was launched, normalised: "python -m sglang.launch_server"
    written_argv: list[str] | None = None  # the arguments as typed, when a config was merged
    config: str | None = None  # the --config FILE merged into argv, as the command names it
    notes: tuple[str, ...] = ()  # what the engine does not read as it looks (--config=FILE)
    unset: tuple[str, ...] = ()  # `env -u NAME`: removed from the inherited environment
    inherit_env: bool = True  # False after `env -i`: the engine starts with `env` alone

    def engine_env(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The environment the engine starts with when launched from `inherited`."""
        base = dict(inherited) if self.inherit_env else {}
        for name in self.unset:
            base.pop(name, None)
        return {**base, **self.env}


@frozen
class _Token:
    text: str
    op: bool = False  # an unquoted shell operator (separator or redirection)


# --------------------------------------------------------------------------------------------
# Tokenising
# --------------------------------------------------------------------------------------------


def _double_quoted(command: str, i: int) -> tuple[str, int]:
    """The text of the "..." starting at command[i] (backslash keeps its POSIX meaning only
    before " \\ $ ` and newline) and the index after the closing quote."""
    out: list[str] = []
    i, n = i + 1, len(command)
    while i < n and command[i] != '"':
        if command[i] == "\\" and i + 1 < n and command[i + 1] in '"\\$`\n':
            if command[i + 1] != "\n":
                out.append(command[i + 1])
            i += 2
            continue
        out.append(command[i])
        i += 1
    if i >= n:
        raise ArgumentError('unterminated " quote in the launch command')
    return "".join(out), i + 1


def _control_operator_end(command: str, i: int) -> int:
    """End of the & | ; operator at command[i]: && || |& ;; &> &>> are one token."""
    c, j, n = command[i], i + 1, len(command)
    if j < n and (command[j] == c or (c == "|" and command[j] == "&")):
        j += 1
    elif c == "&" and j < n and command[j] == ">":  # &> and &>>
        j += 1
        if j < n and command[j] == ">":
            j += 1
    return j


def _shell_tokens(command: str) -> list[_Token]:
    """POSIX-shell words and operators. Quotes are removed; operators are never quoted."""
    tokens: list[_Token] = []
    word: list[str] = []
    in_word = False  # a word has started (possibly an empty quoted one)
    i, n = 0, len(command)

    def end_word() -> None:
        nonlocal in_word
        if in_word:
            tokens.append(_Token("".join(word)))
            word.clear()
            in_word = False

    while i < n:
        c = command[i]
        if c == "\\":
            if i + 1 < n and command[i + 1] == "\n":  # line continuation
                i += 2
                continue
            if i + 1 < n:
                word.append(command[i + 1])
            in_word = True
            i += 2
            continue
        if c == "'":
            j = command.find("'", i + 1)
            if j < 0:
                raise ArgumentError("unterminated ' quote in the launch command")
            word.append(command[i + 1 : j])
            in_word = True
            i = j + 1
            continue
        if c == '"':
            text, i = _double_quoted(command, i)
            word.append(text)
            in_word = True
            continue
        if c == "#" and not in_word:  # comment to end of line
            while i < n and command[i] != "\n":
                i += 1
            continue
        if c == "\n":
            end_word()
            tokens.append(_Token("\n", op=True))
            i += 1
            continue
        if c.isspace():
            end_word()
            i += 1
            continue
        if c in "<>":
            # An all-digit word glued to the operator is its file descriptor (`2>&1`).
            fd = ""
            if in_word and word and "".join(word).isdigit() and command[i - 1].isdigit():
                fd = "".join(word)
                word.clear()
                in_word = False
            end_word()
            j = i + 1
            if j < n and command[j] in ">&|<":
                j += 1
            tokens.append(_Token(fd + command[i:j], op=True))
            i = j
            continue
        if c in "&|;":
            end_word()
            j = _control_operator_end(command, i)
            tokens.append(_Token(command[i:j], op=True))
            i = j
            continue
        word.append(c)
        in_word = True
        i += 1
    end_word()
    return tokens


def _list_tokens(argv: list[str]) -> list[_Token]:
    """Already-split argv: recognise only whole-token separators and redirections."""
    out = []
    for arg in argv:
        is_op = arg in _SEPARATORS or arg in ("&>", "&>>") or bool(_REDIRECT.match(arg))
        out.append(_Token(arg, op=is_op))
    return out


def _segments(tokens: list[_Token]) -> list[list[str]]:
    """Simple commands, with redirections (and their targets) removed."""
    segments: list[list[str]] = [[]]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.op:
            segments[-1].append(tok.text)
            continue
        if tok.text in _SEPARATORS:
            segments.append([])
            continue
        # A redirection: the target is glued (`>log`, `2>&1`) or the next word.
        m = _REDIRECT.match(tok.text)
        glued = m.group(3) if m else ""
        if not glued and i < len(tokens) and not tokens[i].op:
            i += 1
    return [s for s in segments if s]


# --------------------------------------------------------------------------------------------
# Recognising the engine
# --------------------------------------------------------------------------------------------


def _strip_prefix(
    words: list[str], env: dict[str, str], scope: _EnvScope | None = None
) -> list[str]:
    """Drop assignments and wrappers in front of the real program, collecting the env (and in
    `scope`, what `env -u NAME` / `env -i` take away from the inherited one)."""
    i = 0
    while i < len(words):
        w = words[i]
        m = _ASSIGNMENT.match(w)
        if m:
            env[m.group(1)] = m.group(2)
            i += 1
            continue
        base = os.path.basename(w)
        if base in ("nohup", "exec", "time", "setsid"):
            i += 1
            continue
        if base == "env":
            i = _env_options(words, i + 1, env, scope)
            continue
        if base == "stdbuf":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            continue
        if base == "nice":
            i += 1
            if i < len(words) and words[i] == "-n":
                i += 2
            elif i < len(words) and re.match(r"^-(n)?-?\d+$", words[i]):
                i += 1
            continue
        break
    return words[i:]


@dataclass
class _EnvScope:
    """`env -u NAME` and `env -i` in front of the engine (coreutils env)."""

    unset: list[str] = field(default_factory=list)
    inherit: bool = True


def _env_options(words: list[str], i: int, env: dict[str, str], scope: _EnvScope | None) -> int:
    """Read `env`'s options from words[i]; the index of the first word after them."""
    while i < len(words) and words[i].startswith("-"):
        opt = words[i]
        if opt in ("-i", "--ignore-environment", "-"):
            env.clear()  # assignments before it are dropped with the rest of the environment
            if scope is not None:
                scope.inherit = False
            i += 1
        elif opt in ("-u", "--unset") or opt.startswith(("--unset=", "-u")):
            if opt in ("-u", "--unset"):
                name, i = (words[i + 1] if i + 1 < len(words) else ""), i + 2
            else:
                name, i = opt.split("=", 1)[1] if "=" in opt else opt[2:], i + 1
            env.pop(name, None)
            if scope is not None and name:
                scope.unset.append(name)
        else:
            i += 2 if opt in ("-C", "--chdir") else 1
    return i


def _recognise(words: list[str]) -> tuple[str, str, list[str]] | None:
    """(engine, entrypoint, engine argv) if `words` (prefix stripped) launches an engine."""
    if not words:
        return None
    prog = os.path.basename(words[0])
    rest = words[1:]
    if prog in ("sglang", "vllm"):
        if rest and rest[0] == "serve":
            return prog, f"{prog} serve", rest[1:]
        return None
    if not _PYTHON.match(prog):
        return None
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "-m" and i + 1 < len(rest):
            module, after = rest[i + 1], rest[i + 2 :]
            break
        if arg.startswith("-m") and len(arg) > 2:
            module, after = arg[2:], rest[i + 1 :]
            break
        if arg in _PYTHON_OPTS_WITH_ARG:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        # `python path/to/sglang/launch_server.py ...`
        norm = arg.replace("\\", "/")
        if norm.endswith("sglang/launch_server.py"):
            return "sglang", "python -m sglang.launch_server", rest[i + 1 :]
        if norm.endswith("vllm/entrypoints/openai/api_server.py"):
            return "vllm", "python -m vllm.entrypoints.openai.api_server", rest[i + 1 :]
        return None
    else:
        return None
    if module in _SGLANG_MODULES:
        return "sglang", f"python -m {module}", after
    if module in _VLLM_MODULES:
        return "vllm", f"python -m {module}", after
    if module in ("sglang.cli.main", "vllm.entrypoints.cli.main") and after[:1] == ["serve"]:
        engine = module.split(".")[0]
        return engine, f"{engine} serve", after[1:]
    return None


def _shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_launch_command(
    command: str | list[str], engine: str | None = None, cwd: str | None = None
) -> LaunchCommand:
    """Find the engine launch in a pasted command line; ArgumentError when there is none.

    A list of one word holding spaces is a whole command quoted as one argument
    (`servefit plan -- 'python -m sglang.launch_server ...'`): it is read as a string.
    `engine` (--engine, e.g. "vllm==0.24.0") picks the release whose parser merges a
    `--config FILE` (read relative to `cwd`, default the current directory); without it, the
    command's engine as the registry selects it."""
    cmd = _read_command(command)
    if engine is not None:
        from servefit.engines.registry import parse_engine

        if parse_engine(engine)[0] != cmd.engine:
            raise ArgumentError(f"--engine {engine} but the launch command runs {cmd.engine}")
    return _with_config(cmd, engine or cmd.engine, cwd)


def _with_config(cmd: LaunchCommand, spec: str, cwd: str | None) -> LaunchCommand:
    """`cmd` with its --config FILE merged into argv as the release's parser merges it."""
    if not any(a.startswith("--conf") for a in cmd.argv):
        return cmd  # most commands: nothing more is imported
    from servefit.engines import configfile

    note = configfile.ignored_config(cmd.engine, cmd.argv)
    if note is not None:
        return replace(cmd, notes=(*cmd.notes, note))
    if "--config" not in cmd.argv:
        return cmd
    from servefit.engines.registry import select

    profile, _ = select(spec)
    if profile.flag("config") is None:  # a release without it: argparse refuses the word
        return cmd
    merged = configfile.merge_config(profile, cmd.entrypoint, list(cmd.argv), cwd)
    if merged is None:
        return cmd
    return replace(cmd, argv=merged.argv, written_argv=list(cmd.argv), config=merged.path)


def _read_command(command: str | list[str]) -> LaunchCommand:
    if not isinstance(command, str) and len(command) == 1 and any(c.isspace() for c in command[0]):
        command = command[0]
    if isinstance(command, str):
        tokens = _shell_tokens(command)
        shown = command
    else:
        tokens = _list_tokens(list(command))
        shown = " ".join(command)
    segments = _segments(tokens)
    if not segments:
        raise ArgumentError("empty launch command")
    env: dict[str, str] = {}
    for words in segments:
        if words[0] == "export":
            for w in words[1:]:
                m = _ASSIGNMENT.match(w)
                if m:
                    env[m.group(1)] = m.group(2)
            continue
        local_env: dict[str, str] = {}
        scope = _EnvScope()
        found = _recognise(_strip_prefix(words, local_env, scope))
        if found:
            engine, entrypoint, argv = found
            base = env if scope.inherit else {}
            for name in scope.unset:
                base.pop(name, None)
            return LaunchCommand(
                engine=engine,
                argv=list(argv),
                env={**base, **local_env},
                entrypoint=entrypoint,
                unset=tuple(scope.unset),
                inherit_env=scope.inherit,
            )
    raise ArgumentError(
        "not an SGLang or vLLM launch command (expected `python -m sglang.launch_server ...`, "
        f"`sglang serve ...` or `vllm serve MODEL ...`): {_shorten(shown)!r}"
    )
