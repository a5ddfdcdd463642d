"""Judge prompt templates in one place: the papers' prompts (verbatim where printed), looked up by name.

The paper modules (``arena``, ``jury``, ``gar``, ``raro``) define their prompts as module-level
upper-case string constants with ``str.format`` placeholders (literal braces doubled); their comments
say which are the paper's words and which are rewardkit's (where a paper does not print a part). This registry
finds them on first lookup and names them ``<paper>.<constant in lower case>``, e.g.
``get_prompt("jury.autoformalizer")``; ``register`` adds your own.

A judge prompt owns its verdict format: each paper module declares a ``VerdictForm`` beside its template
(``JUDGE_FORMS``: template name -> form), and ``judge_spec(name)`` joins the two in a ``JudgeSpec`` whose
``render``, ``parse`` and ``verdict_request`` agree. The spec looks its template up by name, so a template
replaced with ``register`` keeps its form.

    >>> from rewardkit.prompts import register, render
    >>> _ = register("demo.greet", "Hello {name}, end with {{A}} or {{B}}")
    >>> render("demo.greet", name="judge")
    'Hello judge, end with {A} or {B}'
"""

from __future__ import annotations

import importlib
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rewardkit.verdict_forms import Verdict, VerdictForm

PAPER_MODULES = ("arena", "jury", "gar", "raro")


@dataclass(frozen=True)
class Prompt:
    """One template: its registry name, text (``str.format`` syntax) and where it came from."""

    name: str
    text: str
    source: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        """Placeholder names in order of first appearance."""
        seen: dict[str, None] = {}
        for _, field, _, _ in string.Formatter().parse(self.text):
            if field is not None:
                seen.setdefault(field.split(".")[0].split("[")[0], None)
        return tuple(seen)

    def format(self, **values: object) -> str:
        """The filled-in prompt; a missing or unknown placeholder is an error naming the template."""
        missing = [f for f in self.fields if f not in values]
        extra = [k for k in values if k not in self.fields]
        if missing or extra:
            raise KeyError(f"prompt {self.name!r} takes {list(self.fields)}; missing {missing}, unknown {extra}")
        return self.text.format(**values)


_REGISTRY: dict[str, Prompt] = {}
_FORMS: dict[str, VerdictForm] = {}
_LOADED = False


def register(name: str, text: str, source: str = "user") -> Prompt:
    """Add (or replace) a template under ``name``."""
    p = Prompt(name, text, source)
    list(string.Formatter().parse(text))  # fail early on malformed braces
    _REGISTRY[name] = p
    return p


def _load_papers() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for mod in PAPER_MODULES:
        try:
            m = importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{mod}":  # the module exists but is broken: say so
                raise
            continue
        _FORMS.update(getattr(m, "JUDGE_FORMS", {}))
        for attr, val in vars(m).items():
            if attr.isupper() and isinstance(val, str) and not attr.startswith("_"):
                _REGISTRY.setdefault(f"{mod}.{attr.lower()}", Prompt(f"{mod}.{attr.lower()}", val, m.__name__))


def get_prompt(name: str) -> Prompt:
    """The template registered as ``name`` (e.g. ``jury.autoformalizer``)."""
    _load_papers()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no prompt named {name!r}; known: {', '.join(sorted(_REGISTRY)) or 'none'}") from None


def prompt_names() -> list[str]:
    """All registered template names."""
    _load_papers()
    return sorted(_REGISTRY)


def render(template: str, /, **values: object) -> str:
    """``get_prompt(template).format(**values)``."""
    return get_prompt(template).format(**values)


@dataclass(frozen=True)
class JudgeSpec:
    """A judge prompt and the verdict format it asks for: ``render`` the template, ``parse`` a reply in that
    form, or build the ``verdict_request`` that scores the form's choices after its prefix (logit mode)."""

    name: str
    form: VerdictForm

    @property
    def template(self) -> Prompt:
        """The template registered under ``name`` now (a replacement keeps this form)."""
        return get_prompt(self.name)

    def render(self, **values: object) -> str:
        return self.template.format(**values)

    def parse(self, text: str, finish_reason: str | None = None) -> Verdict:
        return self.form.read(text, finish_reason)

    def verdict_request(self, messages: list[dict[str, str]]) -> Any:
        """A ``VerdictRequest``: the form's choices scored after its prefix at the start of the reply."""
        from rewardkit.backends.base import VerdictRequest

        if not self.form.choices:
            raise ValueError(f"judge prompt {self.name!r}: its verdict form has no logit-mode choices")
        return VerdictRequest(messages, self.form.choices, self.form.prefix)


def judge_spec(name: str) -> JudgeSpec:
    """The judge prompt ``name`` with the verdict form its paper module declares for it."""
    _load_papers()
    if name not in _FORMS:
        raise KeyError(f"prompt {name!r} declares no verdict form; judge prompts: {', '.join(sorted(_FORMS))}")
    return JudgeSpec(name, _FORMS[name])


def judge_spec_names() -> list[str]:
    """Every template that declares a verdict form."""
    _load_papers()
    return sorted(_FORMS)


__all__ = ["PAPER_MODULES", "JudgeSpec", "Prompt", "get_prompt", "judge_spec", "judge_spec_names", "prompt_names",
           "register", "render"]
