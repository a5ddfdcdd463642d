"""Options declared once: frozen dataclasses whose fields carry a type, a default and a one-line help.

Scorers, backends and the TTS judge declare their configuration this way; the registry, ``rewardkit
scorers``, the CLI and the judge-spec grammar read those fields, and ``coerce`` is the one place where a
string from the command line (``-o key=value``) or a judge spec (``smollm2?dtype=bfloat16``) becomes the
declared type.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Demo(Options):
    ...     retries: int = option(3, "extra attempts")
    >>> Demo(**coerce_options(Demo, {"retries": "5"}))
    Demo(retries=5)
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Options:
    """Base of every options class: a frozen dataclass whose fields are the whole configuration.

    Each field has a type hint (``Literal`` for choices), a default and ``metadata={"help": "..."}``
    (``option``). Construction checks choices and rejects nan/inf; subclasses add checks in
    ``__post_init__`` (call ``super().__post_init__()``) raising ``ValueError("option 'x': ...")``.
    """

    def __post_init__(self) -> None:
        hints = option_hints(type(self))
        for f in fields(self):
            v = getattr(self, f.name)
            _check_choice(f.name, v, hints[f.name])  # a dataclass field is always annotated
            if isinstance(v, float) and not math.isfinite(v):  # nan/inf never configure anything sensibly
                raise ValueError(f"option {f.name!r}: must be a finite number, got {v}")

    def _at_least(self, low: float, *names: str, strict: bool = False) -> None:
        """Raise ``option 'x': must be >= low`` (``> low`` if ``strict``) for each named numeric field."""
        for n in names:
            v = getattr(self, n)
            if v is not None and (v <= low if strict else v < low):
                raise ValueError(f"option {n!r}: must be {'>' if strict else '>='} {low}, got {v}")


def option(default: Any, help: str) -> Any:
    """A dataclass field with a default and its one-line help (the CLI and ``rewardkit scorers`` show it)."""
    return field(default=default, metadata={"help": help})


def resolve_options(cls: type[Options], options: Options | None, fields_: dict[str, Any], owner: str) -> Options:
    """``cls(**fields_)``, or ``options`` with ``fields_`` replaced: what ``Thing(options)``,
    ``Thing(**fields)`` and ``Thing(options, x=1)`` mean for every class configured by an options class."""
    if options is None:
        return cls(**fields_)
    if not isinstance(options, cls):
        raise TypeError(f"{owner}: expected {cls.__qualname__} or keyword options, got {type(options).__name__} "
                        "(pass e.g. judge=... by name)")
    return replace(options, **fields_) if fields_ else options


def option_hints(cls: type) -> dict[str, Any]:
    """Resolved type hints of an options class (string annotations evaluated in their modules)."""
    return typing.get_type_hints(cls)


@dataclass(frozen=True)
class OptionInfo:
    name: str
    type: str
    default: Any
    help: str


def options_info(cls: type[Options]) -> list[OptionInfo]:
    """Name, readable type, default and help of every field of an options class."""
    hints = option_hints(cls)
    return [OptionInfo(f.name, type_name(hints[f.name]), f.default, f.metadata.get("help", ""))
            for f in fields(cls)]


def coerce_options(cls: type[Options], values: dict[str, Any], where: str = "options") -> dict[str, Any]:
    """Check option names against ``cls``'s fields and turn string values into the declared types.

    An unknown name is a ``TypeError`` listing the options; a value that does not fit is a
    ``ValueError("option 'x': ...")``. Non-string values pass through (construction checks them).
    """
    hints = option_hints(cls)
    known = [f.name for f in fields(cls)]
    unknown = set(values) - set(known)
    if unknown:
        raise TypeError(f"{where} has no option(s) {sorted(unknown)}; options: {known}")
    out = {}
    for k, v in values.items():
        try:
            out[k] = coerce(v, hints[k]) if isinstance(v, str) else v
        except ValueError as e:
            raise ValueError(f"option {k!r}: {e}") from None
    return out


def coerce(value: str, t: Any) -> Any:
    """One string as the annotated type: bool (1/0, true/false, yes/no, on/off), int, finite float, str,
    ``X | None`` (``none``/``null``), ``Literal`` choices, ``tuple[X, ...]`` (comma-separated).

    >>> coerce("0.5", float), coerce("none", int | None), coerce("1,2,4", tuple[int, ...])
    (0.5, None, (1, 2, 4))
    >>> coerce("logits", typing.Literal["generate", "logit"])
    Traceback (most recent call last):
    ...
    ValueError: must be one of generate, logit, got 'logits'
    """
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and value.lower() in ("none", "null"):
            return None
        errors = []
        for a in (a for a in args if a is not type(None)):
            try:
                return coerce(value, a)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(errors[0] if errors else f"cannot read {value!r}")
    if origin is typing.Literal:
        for choice in args:
            if str(choice) == value:
                return choice
        raise ValueError(f"must be one of {', '.join(map(str, args))}, got {value!r}")
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple(coerce(x.strip(), args[0]) for x in value.split(",") if x.strip())
    if t is bool:
        if value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise ValueError(f"must be true or false, got {value!r}")
    if t is int:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"must be an integer, got {value!r}") from None
    if t is float:
        try:
            v = float(value)
        except ValueError:
            raise ValueError(f"must be a number, got {value!r}") from None
        if not math.isfinite(v):
            raise ValueError(f"must be a finite number, got {value!r}")
        return v
    if t in (str, Any) or t is inspect.Parameter.empty:
        return value
    raise ValueError(f"cannot be set from a string (type {type_name(t)})")


def type_name(t: Any) -> str:
    """A short readable type: ``live|round-robin`` for a Literal, ``JudgeBackend | str`` for a union."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return f"{type_name(args[0])},..."
    if args and origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else type_name(a) for a in args)
    return getattr(t, "__name__", None) or str(t)


def _check_choice(name: str, value: Any, t: Any) -> None:
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Literal and value not in args:
        raise ValueError(f"option {name!r}: must be one of {', '.join(map(str, args))}, got {value!r}")
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        if not isinstance(value, tuple | list):  # a bare string would be read letter by letter, or not at all
            raise ValueError(f"option {name!r}: must be a tuple of {type_name(args[0])}, got {value!r}")
        for v in value:
            _check_choice(name, v, args[0])
    if origin in (typing.Union, types.UnionType):
        lits = [a for a in args if typing.get_origin(a) is typing.Literal]
        if lits and not any(value in typing.get_args(a) for a in lits) and not _is_instance(value, args):
            raise ValueError(f"option {name!r}: must be one of {type_name(t)}, got {value!r}")


def _is_instance(value: Any, args: tuple) -> bool:
    plain = tuple(a for a in args if isinstance(a, type))
    return bool(plain) and isinstance(value, plain)
