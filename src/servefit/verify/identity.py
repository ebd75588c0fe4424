"""Which model answers: the ids `/v1/models` lists, and the `model` every completion names.

What the engines put in a response's `model`:

* SGLang echoes the request's `model` in every chat and completion response and stream chunk
  (`sglang/srt/entrypoints/openai/serving_chat.py:_build_chat_response` and
  `_generate_chat_stream`, `serving_completions.py:_build_completion_response`: `model=
  request.model`, 0.5.9 to 0.5.23) and lists one id, its `--served-model-name`
  (`sglang/srt/entrypoints/http_server.py:available_models`). A response naming another model
  than the one asked for did not come from SGLang's OpenAI layer as released (a proxy or router
  in front of it sent the request elsewhere).
* vLLM answers with the served name, not the request's: the first `--served-model-name` of the
  base model, or the LoRA adapter's name (`vllm/entrypoints/openai/models/serving.py:
  OpenAIServingModels.model_name`, used by `chat_completion/serving.py:
  _create_chat_completion` and `completion/serving.py:_create_completion`, 0.33.0). With
  `--served-model-name a b`, a request for `b` is answered as `a`; `/v1/models` lists both with
  the checkpoint's path as `root` (`OpenAIModelRegistry.show_available_models`), adapters with a
  `parent`.

So a response's `model` is the id asked for, or another base model id the listing gives the
same `root` (one checkpoint under several names). Anything else is another model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from servefit.frozen import frozen

_SHOW = 120


@frozen
class ListedModel:
    """One entry of `/v1/models`, with the fields identity and request sizing read."""

    id: str
    root: str | None = None
    parent: str | None = None
    owned_by: str = ""
    max_model_len: int | None = None


class ModelListError(ValueError):
    """A `/v1/models` answer that does not list models by string ids; the message says what
    was received."""


def received(value: Any) -> str:
    """A value as the server sent it, in JSON, with its JSON type: `NaN (a number)`."""
    if isinstance(value, bool):
        kind = "a boolean"
    elif isinstance(value, (int, float)):
        kind = "a number"
    elif isinstance(value, str):
        kind = "a string"
    elif isinstance(value, list):
        kind = "a list"
    elif isinstance(value, dict):
        kind = "an object"
    else:
        kind = "null"
    text = json.dumps(value, ensure_ascii=True, default=str)
    text = text if len(text) <= _SHOW else text[:_SHOW] + "..."
    return text if kind == "null" else f"{text} ({kind})"


def _entry(i: int, raw: Any, where: str) -> ListedModel:
    if not isinstance(raw, dict):
        raise ModelListError(f"{where} entry {i} is not an object: {received(raw)}")
    if "id" not in raw:
        raise ModelListError(f"{where} entry {i} has no id: {received(raw)}")
    ident = raw["id"]
    if not isinstance(ident, str):
        raise ModelListError(f"{where} entry {i} has id {received(ident)}, not a string")
    if not ident.strip():
        raise ModelListError(f"{where} entry {i} has an empty id: {received(ident)}")
    root, parent = raw.get("root"), raw.get("parent")
    length = raw.get("max_model_len")
    return ListedModel(
        id=ident,
        root=root if isinstance(root, str) and root else None,
        parent=parent if isinstance(parent, str) and parent else None,
        owned_by=str(raw.get("owned_by") or ""),
        max_model_len=length
        if isinstance(length, int) and not isinstance(length, bool) and length > 0
        else None,
    )


def parse_model_list(listing: Any, where: str = "/v1/models") -> list[ListedModel]:
    """Every entry of an OpenAI model list; ModelListError for anything but objects with a
    non-empty string id (a NaN, a number, a missing id), naming what was received."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        raise ModelListError(f"{where} is not a model list: {received(listing)}")
    return [_entry(i, raw, where) for i, raw in enumerate(data)]


def answer_names(models: Iterable[ListedModel], requested: str) -> frozenset[str]:
    """The ids a server may name in `model` when asked for `requested`: itself and, for a base
    model, the other base ids of the same checkpoint (vLLM answers with the first of them)."""
    listed = list(models)
    names = {requested}
    entry = next((m for m in listed if m.id == requested), None)
    if entry is not None and entry.parent is None and entry.root is not None:
        names |= {m.id for m in listed if m.parent is None and m.root == entry.root}
    return frozenset(names)


def identity_problem(answered: list[Any], requested: str, accepted: frozenset[str]) -> str | None:
    """What is wrong with the `model` values a response carried, asked for `requested`, or None.
    `answered` holds every value seen (one per non-streamed body, one per distinct value in a
    stream)."""
    if not answered:
        return f'the response names no model (no "model" field), asked for {requested!r}'
    for value in answered:
        if not isinstance(value, str):
            return (
                f"the response's model is {received(value)}, not a string; asked for {requested!r}"
            )
        if value not in accepted:
            shown = value if len(value) <= _SHOW else value[:_SHOW] + "..."
            return f"the server answered as {shown!r}, asked for {requested!r}"
    return None
