"""The chat template a model is scored with: by default the one its *base* model ships.

Read from a model directory exactly as transformers reads a tokenizer's template:
``chat_template.jinja`` and ``additional_chat_templates/*.jinja`` win over
``tokenizer_config.json``'s ``chat_template`` (a string, or a list of named templates);
with several named templates, a request with tools takes ``tool_use`` and otherwise
``default``. The final model's own files are never read: the harness reads the base
model's (or the model entry's ``chat_template_from``) and hands the scorer the result,
with where it came from, as one small JSON file (:data:`BUNDLE_FILE` in the task dir).

Template variables (``enable_thinking``, ...) stay at the template's defaults unless
the task or the campaign sets them (``kwargs``). A task that needs native tool calls
gets the vLLM tool parser of the base model's family (:data:`FAMILIES`, one table);
where the family's template has no tool support (Gemma 3), the family names a
tool-calling template of ours (``ptb_scorer/templates/``), chosen explicitly and
recorded as such. Standard library only, except :func:`supports_tools` (jinja2, which
both the harness and the scorer have).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the bundle the harness writes into a task dir (the scorer's copy and the agent's)
BUNDLE_FILE = "ptb_chat_template.json"
TEMPLATE_FILE = "chat_template.jinja"
TEMPLATE_DIR = "additional_chat_templates"
TOKENIZER_CONFIG = "tokenizer_config.json"
#: our own templates, each chosen explicitly by a family below
OWN_TEMPLATES = Path(__file__).resolve().parent / "templates"
#: apply_chat_template's own arguments, which no template variable (kwargs) may shadow
RESERVED_KWARGS = frozenset(
    {"messages", "conversation", "tools", "documents", "chat_template", "tokenize", "add_generation_prompt",
     "continue_final_message", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs"}
)  # fmt: skip
#: more than any real template (Qwen3's is 4 kB, Llama 3.1's 5 kB); a bigger file is refused
MAX_TEMPLATE_BYTES = 1 << 20


class TemplateError(Exception):
    """No usable chat template: one line naming the model and what is missing."""


@dataclass(frozen=True)
class Family:
    """What a model family's chat template asks of a tool call, and who parses it."""

    name: str
    #: vLLM's --tool-call-parser for the call format the family's template asks for
    tool_parser: str
    #: the call format, as docs/scoring.md's table shows it
    call_format: str
    #: our tool-calling template (OWN_TEMPLATES/<file>) when the family's has no tools section
    tool_template: str | None = None


#: One table: each family's tool-call format and parser (and our template where it has none).
FAMILIES: dict[str, Family] = {
    "qwen3": Family("qwen3", "hermes", "<tool_call>{json}</tool_call>"),
    "smollm3": Family("smollm3", "hermes", "<tool_call>{json}</tool_call>"),
    "llama3": Family("llama3", "llama3_json", '{"name": ..., "parameters": ...} (JSON)'),
    "gemma3": Family("gemma3", "pythonic", "[f(a=1)] (a Python list of calls)", "gemma3_tool_calling.jinja"),
}
#: config.json ``architectures[0]`` -> family
ARCHITECTURES: dict[str, str] = {
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3",
    "SmolLM3ForCausalLM": "smollm3",
    "LlamaForCausalLM": "llama3",
    "Gemma3ForCausalLM": "gemma3",
    "Gemma3ForConditionalGeneration": "gemma3",
}


def family_of(architecture: str | None) -> Family | None:
    return FAMILIES.get(ARCHITECTURES.get(architecture or "", ""))


def same_family(base_architecture: str, architecture: str) -> bool:
    """A final model is its base model's family (another class of it is fine: Gemma 3's
    text-only Gemma3ForCausalLM saved from a Gemma3ForConditionalGeneration base)."""
    return ARCHITECTURES.get(base_architecture, base_architecture) == ARCHITECTURES.get(architecture, architecture)


@dataclass(frozen=True)
class Found:
    """One template of a model directory and the file it was read from."""

    text: str
    file: str


def _read(path: Path) -> str:
    """A template file (a hub snapshot's files are links into its blobs: followed)."""
    if path.stat().st_size > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"{path}: larger than {MAX_TEMPLATE_BYTES} bytes")
    return path.read_text(encoding="utf-8")


def model_templates(model_dir: Path) -> dict[str, Found]:
    """Every named template of a model directory (``default`` for the unnamed one), as
    transformers' tokenizer loads them; empty when it ships none."""
    model_dir = Path(model_dir)
    found: dict[str, Found] = {}
    if (model_dir / TEMPLATE_FILE).is_file():
        found["default"] = Found(_read(model_dir / TEMPLATE_FILE), TEMPLATE_FILE)
    extra = model_dir / TEMPLATE_DIR
    for path in sorted(extra.glob("*.jinja")) if extra.is_dir() else []:
        found[path.name.removesuffix(".jinja")] = Found(_read(path), f"{TEMPLATE_DIR}/{path.name}")
    if found or not (model_dir / TOKENIZER_CONFIG).is_file():
        return found
    try:
        config = json.loads(_read(model_dir / TOKENIZER_CONFIG))
    except ValueError as e:
        raise TemplateError(f"{model_dir / TOKENIZER_CONFIG}: not JSON ({e})") from None
    raw = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(raw, str):
        return {"default": Found(raw, TOKENIZER_CONFIG)}
    if isinstance(raw, list):
        return {
            t["name"]: Found(t["template"], f"{TOKENIZER_CONFIG}#{t['name']}")
            for t in raw
            if isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str)
        }
    return {}


def pick(templates: Mapping[str, Found], tools: bool) -> str | None:
    """transformers' choice among named templates (get_chat_template): ``tool_use`` for a
    request with tools, else ``default``; one unnamed template is ``default``."""
    if tools and "tool_use" in templates:
        return "tool_use"
    return "default" if "default" in templates else None


def supports_tools(text: str) -> bool:
    """The template reads the ``tools`` it is given (so it can render them)."""
    import jinja2
    import jinja2.ext
    import jinja2.meta
    import jinja2.nodes

    class Generation(jinja2.ext.Extension):
        """transformers' {% generation %} block (assistant masks); only parsed here."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body).set_lineno(lineno)

    env = jinja2.Environment(extensions=[Generation, jinja2.ext.loopcontrols])
    return "tools" in jinja2.meta.find_undeclared_variables(env.parse(text))


@dataclass(frozen=True)
class ChatTemplate:
    """The template one task is scored with, where it came from, and how it is applied."""

    text: str
    #: repo id or local directory (as the campaign names it), or "ptb_scorer" for ours
    repo: str
    #: the file in it: tokenizer_config.json, chat_template.jinja, templates/<ours>.jinja, ...
    file: str
    #: the snapshot's commit (None for a local directory or our own file)
    revision: str | None
    #: template variables set for rendering; empty = the template's own defaults
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: vLLM's --tool-call-parser, for a task with native tool calls
    tool_parser: str | None = None
    #: why our own template stands in for the base model's (None: it is the base model's)
    replaces: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def record(self) -> dict[str, Any]:
        """What metrics.json says about it (the text itself is in the task dir's bundle)."""
        return {
            "source": {"repo": self.repo, "file": self.file, "revision": self.revision},
            "sha256": self.sha256,
            "kwargs": dict(self.kwargs),
            "tool_parser": self.tool_parser,
            "replaces": self.replaces,
        }

    def to_json(self) -> str:
        return json.dumps({**self.record(), "text": self.text}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, raw: str) -> ChatTemplate:
        data = json.loads(raw)
        source = data["source"]
        template = cls(
            text=data["text"],
            repo=source["repo"],
            file=source["file"],
            revision=source.get("revision"),
            kwargs=data.get("kwargs") or {},
            tool_parser=data.get("tool_parser"),
            replaces=data.get("replaces"),
        )
        if template.sha256 != data.get("sha256"):
            raise ValueError("the template's text does not match its sha256")
        return template


@dataclass(frozen=True)
class Source:
    """A model directory to take the template from, and how the records name it."""

    dir: Path
    repo: str
    revision: str | None = None


def choose(
    source: Source,
    architecture: str | None,
    *,
    tool_calling: bool,
    kwargs: Mapping[str, Any] | None = None,
) -> ChatTemplate:
    """The template a task is scored with, from the base model's (or its template
    source's) directory; a TemplateError (one line) when there is none to use."""
    templates = model_templates(source.dir)
    name = pick(templates, tool_calling)
    if name is None:
        raise TemplateError(
            f"{source.repo} ships no chat template ({TEMPLATE_FILE}, {TOKENIZER_CONFIG} chat_template)"
            + (f"; named ones: {', '.join(sorted(templates))}" if templates else "")
        )
    found = templates[name]
    base = ChatTemplate(found.text, source.repo, found.file, source.revision, dict(kwargs or {}))
    if not tool_calling:
        return base
    fam = family_of(architecture)
    if fam is None:
        raise TemplateError(
            f"{source.repo}: architecture {architecture} has no tool-call parser in ptb_scorer.chat_template.FAMILIES"
            f" (known: {', '.join(sorted(ARCHITECTURES))})"
        )
    if supports_tools(found.text):
        return dataclasses.replace(base, tool_parser=fam.tool_parser)
    if fam.tool_template is None:
        raise TemplateError(
            f"{source.repo}: its chat template has no tools section and {fam.name} has no template of ours"
        )
    own = OWN_TEMPLATES / fam.tool_template
    return ChatTemplate(
        text=_read(own),
        repo="ptb_scorer",
        file=f"templates/{fam.tool_template}",
        revision=None,
        kwargs=dict(kwargs or {}),
        tool_parser=fam.tool_parser,
        replaces=f"{source.repo} {found.file} (no tools section)",
    )


def load_bundle(path: Path) -> ChatTemplate:
    """The bundle the harness wrote; a TemplateError naming the file when it is not one."""
    try:
        return ChatTemplate.from_json(_read(Path(path)))
    except FileNotFoundError:
        raise TemplateError(
            f"{path} not found: the harness writes it (the base model's chat template); "
            "run by hand, pass --chat-template-from <base model dir>"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TemplateError(f"{path}: not a chat template bundle ({e})") from None
