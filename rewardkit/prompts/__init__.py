"""Judge prompt templates in one place: the papers' prompts (verbatim where printed), looked up by name.

The paper modules (``arena``, ``jury``, ``gar``, ``raro``) define their prompts as module-level
upper-case string constants with ``str.format`` placeholders (literal braces doubled); their comments
say which are the paper's words and which are rewardkit's (where a paper does not print a part). This registry
finds them on first lookup and names them ``<paper>.<constant in lower case>``, e.g.
``get_prompt("jury.autoformalizer")``; ``register`` adds your own.

    >>> from rewardkit.prompts import register, render
    >>> _ = register("demo.greet", "Hello {name}, end with {{A}} or {{B}}")
    >>> render("demo.greet", name="judge")
    'Hello judge, end with {A} or {B}'
"""

from __future__ import annotations

import importlib
import string
from dataclasses import dataclass

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


__all__ = ["PAPER_MODULES", "Prompt", "get_prompt", "prompt_names", "register", "render"]
