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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from servefit.errors import ArgumentError

__all__ = ["LaunchCommand", "parse_launch_command"]

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_SEPARATORS = {";", "&", "&&", "||", "|", "|&", "\n"}
_REDIRECT = re.compile(r"^(\d*|&)(>&|<&|>>|>\||<<|>|<)(.*)$", re.S)
# python options that take a separate argument (`python -W ignore -m ...`)
_PYTHON_OPTS_WITH_ARG = {"-W", "-X", "--check-hash-based-pycs"}

_SGLANG_MODULES = {"sglang.launch_server"}
_VLLM_MODULES = {"vllm.entrypoints.openai.api_server"}


@dataclass(frozen=True)
class LaunchCommand:
    engine: str  # "sglang" | "vllm"
    argv: list[str]  # the engine's own arguments
    env: dict[str, str] = field(default_factory=dict)  # assignments in front of / before it
    entrypoint: str = ""  # how it was launched, normalised: "python -m sglang.launch_server"


@dataclass(frozen=True)
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


def _strip_prefix(words: list[str], env: dict[str, str]) -> list[str]:
    """Drop assignments and wrappers in front of the real program, collecting the env."""
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
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] in ("-u", "--unset", "-C", "--chdir") else 1
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


def parse_launch_command(command: str | list[str]) -> LaunchCommand:
    """Find the engine launch in a pasted command line; ArgumentError when there is none.

    A list of one word holding spaces is a whole command quoted as one argument
    (`servefit plan -- 'python -m sglang.launch_server ...'`): it is read as a string."""
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
        found = _recognise(_strip_prefix(words, local_env))
        if found:
            engine, entrypoint, argv = found
            return LaunchCommand(
                engine=engine, argv=list(argv), env={**env, **local_env}, entrypoint=entrypoint
            )
    raise ArgumentError(
        "not an SGLang or vLLM launch command (expected `python -m sglang.launch_server ...`, "
        f"`sglang serve ...` or `vllm serve MODEL ...`): {_shorten(shown)!r}"
    )
