"""A launch command's `--config FILE`, merged into its arguments the way the engine merges it.

    merge_config(profile, "vllm serve", ["Qwen/Qwen3-8B", "--config", "c.yaml", "-tp", "1"])
    c.yaml: {tensor_parallel_size: 2, gpu-memory-utilization: 0.8}
    -> ["Qwen/Qwen3-8B", "--tensor_parallel_size", "2", "--gpu-memory-utilization", "0.8",
        "-tp", "1"]                        (the command line comes last, so it wins: TP 1)

vLLM: vllm/utils/argparse_utils.py:FlexibleArgumentParser.parse_args calls
`_pull_args_from_config` when the word `--config` is in argv; `load_config_file` turns each
key into `--KEY VALUE` (a list: `--KEY item ...`; a mapping: `--KEY <json>`; true: `--KEY`;
false: `--no-KEY` where the parser has it, else nothing) and the file's arguments go after
`serve MODEL` (or first, for the api_server module), before the rest of the command line.

SGLang: sglang/srt/server_args.py:prepare_server_args runs ConfigArgumentMerger
(sglang/srt/server_args_config_parser.py; utils/ from 0.5.19) when `--config` is in argv: the
file's arguments go first, the whole command line after them. store_true flags take
true/false; other booleans are written `--KEY true|false`; flags of other argparse actions
are refused by name. 0.5.14 adds JSON for mappings; 0.5.23 reads keys by every long spelling
of a flag and accepts every single-value action.

Both engines read the file relative to their working directory (the current one here), and
only from `--config FILE` as two words: `--config=FILE` is stored and never read. PyYAML is
imported only when a command has a config file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Any

from servefit.engines.base import Flag, Profile
from servefit.errors import ArgumentError, EngineRejection
from servefit.frozen import frozen

__all__ = ["ConfigRejection", "MergedConfig", "ignored_config", "merge_config"]

VLLM_API_SERVER = "python -m vllm.entrypoints.openai.api_server"
_NAME = {"sglang": "SGLang", "vllm": "vLLM"}
_SGLANG_MERGER = "sglang/srt/server_args_config_parser.py:ConfigArgumentMerger"
_VLLM_PARSER = "vllm/utils/argparse_utils.py:FlexibleArgumentParser"


class ConfigRejection(EngineRejection):
    """The engine stops on the config file (its own text): a predicted failure, shown as the
    engine's verdict like an argparse refusal (`hints` empty)."""

    hints: tuple[str, ...] = ()


@frozen
class MergedConfig:
    argv: list[str]  # the engine's arguments once the file is merged in, secret values masked
    path: str  # the file as the command names it
    added: tuple[str, ...]  # the arguments the file contributed, secret values masked


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


def ignored_config(engine: str, argv: list[str]) -> str | None:
    """A note when the command names a config file the engine will not read: `--config=FILE`
    (or an abbreviation of --config), which argparse stores and nothing loads."""
    if "--config" in argv:
        return None
    for tok in argv:
        name, eq, value = tok.partition("=")
        if len(name) >= 6 and "--config".startswith(name) and (eq or name != "--config"):
            shown = f"{name}={value}" if eq else name
            return (
                f"{shown}: {_NAME[engine]} reads a config file only from `--config FILE` (two "
                "words, the exact flag); this one is stored and never read"
            )
    return None


def merge_config(
    profile: Profile,
    entrypoint: str,
    argv: list[str],
    cwd: str | None = None,
    *,
    masked: bool = True,
) -> MergedConfig | None:
    """The command's arguments with its `--config FILE` merged in, None without one. Raises
    ArgumentError (bad input, exit 2) when the file cannot be read or is not YAML, and
    ConfigRejection with the engine's text where the engine itself refuses the file.
    Secret values are masked unless `masked` is False (for what must send or find a key:
    a launch's probes and redaction by value; never for output)."""
    if "--config" not in argv:  # both engines test for the exact word
        return None
    engine = profile.engine
    path = _config_path(engine, argv)
    data = _load(engine, path, cwd)
    if engine == "vllm":
        added = _vllm_args(data, profile, entrypoint)
        merged = _vllm_merge(entrypoint, argv, added)
    else:
        added = _sglang_args(data, profile)
        at = argv.index("--config")
        merged = added + argv[:at] + argv[at + 2 :]  # ConfigArgumentMerger.merge_config_with_args
        _check_sglang_serve(profile, entrypoint, argv, added)
    if not masked:
        return MergedConfig(argv=merged, path=path, added=tuple(added))
    from servefit.engines.secretflags import redactor

    red = redactor(engine, profile.version)
    return MergedConfig(argv=red.argv(merged), path=path, added=tuple(red.argv(added)))


def _config_path(engine: str, argv: list[str]) -> str:
    """The file named after `--config`; the engine's error when there are several or none."""
    count, at = argv.count("--config"), argv.index("--config")
    if engine == "vllm":
        # FlexibleArgumentParser._pull_args_from_config
        if count > 1:
            raise ConfigRejection(
                f"AssertionError: More than one config file specified! ({_VLLM_PARSER}."
                "_pull_args_from_config)"
            )
        if at == len(argv) - 1:
            raise ConfigRejection(
                "ValueError: No config file specified! Please check your command-line "
                f"arguments. ({_VLLM_PARSER}._pull_args_from_config)"
            )
    else:
        # ConfigArgumentMerger._extract_config_file_path
        if count > 1:
            raise ConfigRejection(
                "ValueError: Multiple config files specified! Only one allowed. "
                f"({_SGLANG_MERGER}._extract_config_file_path)"
            )
        if at == len(argv) - 1:
            raise ConfigRejection(
                "ValueError: No config file specified after --config flag! "
                f"({_SGLANG_MERGER}._extract_config_file_path)"
            )
    return argv[at + 1]


def _load(engine: str, path: str, cwd: str | None) -> dict[Any, Any]:
    """The file's top-level mapping, checked in the engine's order: its suffix, that it
    exists, that it parses as YAML, that it is a mapping."""
    if engine == "vllm":
        extension = path.split(".")[-1]  # FlexibleArgumentParser.load_config_file
        if extension not in ("yaml", "yml"):
            raise ConfigRejection(
                f"ValueError: Config file must be of a yaml/yml type. {extension} supplied "
                f"({_VLLM_PARSER}.load_config_file)"
            )
    else:
        suffix = os.path.splitext(path)[1]  # ConfigArgumentMerger._validate_yaml_file
        if suffix.lower() not in (".yaml", ".yml"):
            raise ConfigRejection(
                f"ValueError: Config file must be YAML format, got: {suffix} "
                f"({_SGLANG_MERGER}._validate_yaml_file)"
            )
    full = os.path.join(cwd or os.getcwd(), os.path.expanduser(path))
    data = _read_yaml(engine, path, full)
    if engine == "sglang" and data is None:
        data = {}  # ConfigArgumentMerger._parse_yaml_config: an empty file is no options
    if not isinstance(data, dict):
        if engine == "vllm":  # load_config_file calls config.items()
            raise ConfigRejection(
                f"AttributeError: '{type(data).__name__}' object has no attribute 'items' "
                f"(--config {path}: the file's top level is not a mapping; "
                f"{_VLLM_PARSER}.load_config_file)"
            )
        raise ConfigRejection(
            "ValueError: Config file must contain a dictionary at root level "
            f"(--config {path}; {_SGLANG_MERGER}._parse_yaml_config)"
        )
    return data


# A launch's config file is a few lines; more than this is not one (and is not read whole).
MAX_CONFIG_BYTES = 16 << 20
# Values of the file once its YAML aliases are expanded: both engines turn every value into
# argument text (str() of a list's items, json.dumps of a mapping), so a file of nested aliases
# ("billion laughs") is as large as its expansion for them, and for servefit.
MAX_CONFIG_VALUES = 100_000


def _read_yaml(engine: str, path: str, full: str) -> Any:
    """yaml.safe_load of the file; a file that cannot be read or parsed is bad input. A FIFO
    or device is refused before it is opened (opening a FIFO waits for a writer, /dev/zero
    never ends)."""
    _check_regular(path, full)
    try:
        with open(full) as f:  # the engines open it with the locale's encoding, as here
            text = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        if engine == "sglang" and not os.path.exists(full):
            said = f"ValueError: Config file not found: {path}"
        else:
            said = f"{type(exc).__name__}: [Errno {exc.errno}] {exc.strerror}: {path!r}"
        raise ArgumentError(
            f"--config {path}: cannot read the file here ({exc.strerror}); "
            f"{_NAME[engine]} stops on it too: {said}"
        ) from None
    except UnicodeDecodeError as exc:
        raise ArgumentError(f"--config {path}: cannot read the file as text ({exc})") from None
    if len(text) > MAX_CONFIG_BYTES:
        raise ArgumentError(
            f"--config {path}: more than {MAX_CONFIG_BYTES >> 20} MiB, not a launch's config file"
        )
    import yaml  # only for a command that names a config file: the CLI stays fast

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ArgumentError(f"--config {path} is not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise ArgumentError(f"--config {path}: nested too deeply to be a config file") from None
    if _expanded_values(data, MAX_CONFIG_VALUES) > MAX_CONFIG_VALUES:
        raise ArgumentError(
            f"--config {path}: its YAML aliases expand to more than {MAX_CONFIG_VALUES:,} "
            "values, which the engine would turn into argument text one by one"
        )
    return data


def _check_regular(path: str, full: str) -> None:
    try:
        st = os.stat(full)
    except OSError:
        return  # missing or unreadable: open() says which, in the engine's words
    if stat.S_ISDIR(st.st_mode):
        raise ArgumentError(f"--config {path} is a directory, not a config file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise ArgumentError(f"--config {path} is {kind}, not a regular config file")


def _expanded_values(data: Any, cap: int) -> int:
    """How many values `data` holds with every alias expanded, counted up to `cap`: a shared
    node's count is computed once (memoised by identity), so a bomb is measured, not walked."""
    sizes: dict[int, int] = {}

    def count(node: Any) -> int:
        if not isinstance(node, (list, dict)):
            return 1
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = cap + 1  # a cycle (a recursive alias) is unbounded
        items = node.values() if isinstance(node, dict) else node
        total = 1
        for item in items:
            total += count(item)
            if total > cap:
                break
        sizes[id(node)] = min(total, cap + 1)
        return sizes[id(node)]

    return count(data)


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's error on one line: what it was parsing, the problem, where (1-based)."""
    problem = getattr(exc, "problem", None)
    if not problem:
        return " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{context + ', ' if context else ''}{problem}{where}"


# --------------------------------------------------------------------------------------------
# vLLM
# --------------------------------------------------------------------------------------------


def _vllm_args(data: Mapping[Any, Any], profile: Profile, entrypoint: str) -> list[str]:
    """FlexibleArgumentParser.load_config_file: the file's keys as arguments."""
    # `--no-KEY` for false needs the option on the parser whose parse_args reads the file: the
    # top-level `vllm` parser for `vllm serve` (no such options: false is dropped), the server's
    # own parser for the api_server module; releases before 0.32 drop false (0.24's
    # load_config_file has no `--no-` branch)
    options: set[str] = set()
    if entrypoint == VLLM_API_SERVER and _release(profile.version) >= (0, 32, 0):
        options = {n for f in profile.flags for n in f.names}
    out: list[str] = []
    for key, value in data.items():
        if not isinstance(key, str):
            raise ConfigRejection(
                f'TypeError: can only concatenate str (not "{type(key).__name__}") to str '
                f"(config key {key!r}; {_VLLM_PARSER}.load_config_file)"
            )
        if isinstance(value, bool):
            if value:
                out.append("--" + key)
            elif f"--no-{key}" in options:
                out.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                out += ["--" + key, *(str(item) for item in value)]
        elif isinstance(value, dict):
            out += ["--" + key, _json(key, value, _VLLM_PARSER + ".load_config_file")]
        else:
            out += ["--" + key, str(value)]
    return out


def _json(key: str, value: Any, where: str) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise ConfigRejection(
            f"{type(exc).__name__}: {exc} (config key {key!r}; {where})"
        ) from None


def _vllm_merge(entrypoint: str, argv: list[str], added: list[str]) -> list[str]:
    """FlexibleArgumentParser._pull_args_from_config: the file's arguments after `serve MODEL`
    (after `serve` when the model is not on the command line), first for the api_server
    module, so that the command line comes last and wins."""
    args = list(argv)
    if entrypoint != "vllm serve":
        at = args.index("--config")
        if not args[0].startswith("-"):
            return [args[0], *added, *args[1:at], *args[at + 2 :]]
        return [*added, *args[:at], *args[at + 2 :]]
    # parse_args first moves a `--model X` of `vllm serve` to the model's place
    moved = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
    if moved is not None and (args[moved] != "--model" or moved + 1 < len(args)):
        tag, rest = (
            (args[moved + 1], moved + 2)
            if args[moved] == "--model"
            else (args[moved].removeprefix("--model="), moved + 1)
        )
        args = [tag, *args[:moved], *args[rest:]]
    at = args.index("--config")
    if args and not args[0].startswith("-"):
        return [args[0], *added, *args[1:at], *args[at + 2 :]]
    if "--model" not in added:
        raise ConfigRejection(
            "ValueError: No model specified! Please specify model either as a positional "
            f"argument or in a config file. ({_VLLM_PARSER}._pull_args_from_config)"
        )
    return [*added, *args[:at], *args[at + 2 :]]


# --------------------------------------------------------------------------------------------
# SGLang
# --------------------------------------------------------------------------------------------


def _action(flag: Flag) -> tuple[str, bool, bool]:
    """(argparse action class, store_true, takes one value) of a table entry. The table names
    non-standard actions; a plain one is store_true / store_false / store by its kind. The
    engine's own actions default to nargs=0 where they take no value
    (sglang/srt/arg_groups/argparse_actions.py); BooleanOptionalAction has nargs=0."""
    action = getattr(flag, "action", None)
    nargs = getattr(flag, "nargs", None)
    if action is None:
        if flag.kind == "bool":
            return "_StoreTrueAction", True, False
        if flag.kind == "bool_false":
            return "_StoreFalseAction", False, False
        return "_StoreAction", False, True
    if action in ("BooleanOptionalAction", "DeprecatedStoreTrueAction"):
        nargs = 0
    return action, False, nargs is None


def _keys(flag: Flag, every_spelling: bool) -> set[str]:
    """The YAML keys that name a flag: its dest, and from 0.5.23 every long spelling
    (server_args_config_parser.py:_config_keys)."""
    keys = {flag.dest}
    if every_spelling:
        keys |= {n[2:].replace("-", "_") for n in flag.names if n.startswith("--")}
    return keys


def _sglang_actions(
    flags: Iterable[Flag], release: tuple[int, ...]
) -> tuple[set[str], dict[str, str]]:
    """ConfigArgumentMerger.__init__: the keys of store_true flags, and the keys of flags it
    refuses with their action's class. Before 0.5.23 only store_true and store are accepted,
    by dest; 0.5.23 accepts every single-value action and reads every spelling."""
    newest = release >= (0, 5, 23)
    store_true: set[str] = set()
    supported: set[str] = set()
    refused: dict[str, str] = {}
    for flag in flags:
        if "--config" in flag.names or "--help" in flag.names:
            continue
        cls, is_true, one_value = _action(flag)
        keys = _keys(flag, newest)
        if is_true:
            store_true |= keys
        if is_true or cls == "_StoreAction" or (newest and one_value):
            supported |= keys
        else:
            refused.update(dict.fromkeys(keys, cls))
    if newest:  # a key a supported flag also reads stays usable
        refused = {k: v for k, v in refused.items() if k not in supported}
    return store_true, refused


def _sglang_args(data: Mapping[Any, Any], profile: Profile) -> list[str]:
    """ConfigArgumentMerger._convert_config_to_args."""
    release = _release(profile.version)
    store_true, refused = _sglang_actions(profile.flags, release)
    where = f"{_SGLANG_MERGER}._convert_config_to_args"
    out: list[str] = []
    for key, value in data.items():
        if not isinstance(key, str):
            raise ConfigRejection(
                f"AttributeError: '{type(key).__name__}' object has no attribute 'replace' "
                f"(config key {key!r}; {where})"
            )
        key_norm = key.replace("-", "_")
        if key_norm in refused:
            raise ConfigRejection(
                f"ValueError: Unsupported config option '{key_norm}' with action "
                f"'{refused[key_norm]}' ({where})"
            )
        if isinstance(value, bool):
            if key_norm not in store_true:
                out += [f"--{key}", str(value).lower()]
            elif value:
                out.append(f"--{key}")
        elif isinstance(value, list):
            if value:
                out += [f"--{key}", *(str(item) for item in value)]
        elif isinstance(value, dict) and release >= (0, 5, 14):
            out += [f"--{key}", _json(key, value, where)]
        else:  # before 0.5.14 a mapping is written as Python's str() of it
            out += [f"--{key}", str(value)]
    return out


def _sglang_model_on_cli(release: tuple[int, ...], argv: list[str]) -> bool:
    """sglang/cli/utils.py:get_model_path (try_get_model_path from 0.5.18): `--model-path`
    (and `--model` from 0.5.11) as `--flag X` or `--flag=X`; from 0.5.16 sglang/cli/serve.py
    reads a first positional word as the model path too."""
    names = ("--model-path", "--model") if release >= (0, 5, 11) else ("--model-path",)
    if release >= (0, 5, 16) and argv and not argv[0].startswith("-"):
        return True
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            return True
        if any(arg.startswith(n + "=") for n in names):
            return True
    return False


def _check_sglang_serve(
    profile: Profile, entrypoint: str, argv: list[str], added: list[str]
) -> None:
    """`sglang serve` looks for the model path on its command line before anything reads the
    config file (sglang/cli/serve.py:serve -> sglang/cli/utils.py:get_model_path): a model
    path given only in the file stops it."""
    if entrypoint != "sglang serve" or _sglang_model_on_cli(_release(profile.version), argv):
        return
    if any(a.split("=")[0] in ("--model-path", "--model") for a in added):
        raise ConfigRejection(
            "Exception: Error: --model-path is required. Please provide the path to the model. "
            "(`sglang serve` reads the model path from its command line, not from --config: "
            "sglang/cli/utils.py:get_model_path)"
        )
