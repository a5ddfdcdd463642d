"""Options declared once (``rewardkit.options``): one coercer for ``-o key=value``, judge specs and the TTS CLI."""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import Literal, Optional

import pytest

from rewardkit.backends import parse_spec
from rewardkit.backends.http import HTTPBackend, HTTPOptions
from rewardkit.backends.llamacpp_backend import LlamaCppBackend
from rewardkit.backends.transformers_backend import TransformersBackend
from rewardkit.backends.vllm_backend import VLLMBackend
from rewardkit.options import Options, coerce, coerce_options, option
from rewardkit.scoring import get_scorer


def test_coerce_types():
    assert coerce("true", bool) is True and coerce("off", bool) is False
    assert coerce("3", int) == 3 and coerce("0.5", float) == 0.5 and coerce("x", str) == "x"
    assert coerce("none", Optional[int]) is None and coerce("4", int | None) == 4 and coerce("null", float | None) is None
    assert coerce("live", Literal["live", "round_robin"]) == "live"
    assert coerce("1, 2,4", tuple[int, ...]) == (1, 2, 4)
    for value, t, message in [("maybe", bool, "must be true or false"), ("1.5", int, "must be an integer"),
                              ("nan", float, "must be a finite number"), ("inf", float, "finite"),
                              ("logits", Literal["generate", "logit"], "must be one of generate, logit, got 'logits'"),
                              ("1,x", tuple[int, ...], "must be an integer, got 'x'")]:
        with pytest.raises(ValueError, match=message):
            coerce(value, t)


def test_scorer_options_and_judge_specs_are_typed_by_the_same_rules():
    """The same strings give the same values and the same messages through `-o key=value` (scorers) and a
    judge spec's query (backends): one coercer, ``rewardkit.options.coerce``."""
    sc = get_scorer("critic", judge="smollm2", max_tokens="64", temperature="0.5", mode="logit")
    assert (sc.options.max_tokens, sc.options.temperature, sc.options.mode) == (64, 0.5, "logit")
    _, kw = parse_spec("http://h:1/v1?retries=2&timeout=0.5")
    assert (kw["retries"], kw["timeout"]) == (2, 0.5)
    for (scorer_key, spec_key), bad, message in [(("temperature", "timeout"), "nan", "must be a finite number"),
                                                  (("max_tokens", "retries"), "1.0", "must be an integer")]:
        with pytest.raises(ValueError, match=f"option '{scorer_key}': {message}, got '{bad}'"):
            get_scorer("critic", **{scorer_key: bad})
        with pytest.raises(ValueError, match=f"option '{spec_key}': {message}, got '{bad}'"):
            parse_spec(f"http://h:1/v1?{spec_key}={bad}")


def test_every_backend_declares_its_options_once():
    """Each backend's options are a frozen Options dataclass with a type, a default and a help per field;
    the constructor takes exactly those keywords (vLLM also passes engine arguments through)."""
    for cls in (TransformersBackend, HTTPBackend, VLLMBackend, LlamaCppBackend):
        assert issubclass(cls.Options, Options) and cls.Options.__dataclass_params__.frozen
        assert all(f.metadata.get("help") for f in fields(cls.Options)), cls
    assert "max_prompt_tokens" in {f.name for f in fields(TransformersBackend.Options)}
    with pytest.raises(ValueError, match="option 'top_logprobs': must be <= 20"):
        HTTPOptions(top_logprobs=21)
    with pytest.raises(TypeError):
        HTTPBackend("http://127.0.0.1:9/v1", tiemout=3)  # a misspelt option is refused, not ignored
    assert "api_key" not in {f.name for f in fields(HTTPOptions)}  # a secret stays out of options and reprs


def test_unknown_options_name_the_known_ones():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class D(Options):
        k: int = option(4, "votes")

    with pytest.raises(TypeError, match=r"^options has no option\(s\) \['kk'\]; options: \['k'\]$"):
        coerce_options(D, {"kk": "3"})
    assert D(**coerce_options(D, {"k": "3"})) == D(k=3)


@pytest.mark.parametrize("text, want", [("1", True), ("TRUE", True), ("Yes", True), ("on", True),
                                        ("0", False), ("False", False), ("NO", False), ("off", False)])
def test_coerce_reads_every_boolean_spelling_in_any_case(text, want):
    assert coerce(text, bool) is want


@pytest.mark.parametrize("text, t, want", [
    ("NONE", int | None, None), ("Null", Optional[float], None),
    ("7", int | float, 7), ("1.5", int | float, 1.5),  # the first type that reads it
    ("2", Literal[1, 2], 2),  # a non-string choice is matched by its text and returned as itself
    ("1,,2, ", tuple[int, ...], (1, 2)), ("", tuple[int, ...], ()),  # empty entries are skipped
    ("1e3", float, 1000.0), ("-4", int, -4), ("none", str, "none"),  # "none" is a string where None is not allowed
])
def test_coerce_unions_choices_tuples_and_numbers(text, t, want):
    got = coerce(text, t)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("text, t, message", [
    ("0x10", int, "must be an integer, got '0x10'"),  # base 10 only
    ("x", int | float, "must be an integer, got 'x'"),  # the first alternative's reason
    ("none", int, "must be an integer, got 'none'"),  # None only where the type allows it
    ("-inf", float | None, "must be a finite number, got '-inf'"),
    ("a", list, r"cannot be set from a string \(type list\)"),
    ("3", Literal[1, 2], "must be one of 1, 2, got '3'"),
    ("1,a", tuple[int, str], r"cannot be set from a string \(type tuple\)"),  # only tuple[X, ...] is read
])
def test_coerce_refuses_with_the_reason(text, t, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        coerce(text, t)


def test_coerce_options_prefixes_the_option_passes_non_strings_and_names_the_place():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class D(Options):
        k: int = option(4, "votes")
        mode: Literal["a", "b"] = option("a", "mode")
        flag: bool = option(False, "flag")
        cap: int | None = option(3, "cap")

    got = coerce_options(D, {"k": 5, "mode": "b", "flag": True, "cap": None})  # only strings are read
    assert got == {"k": 5, "mode": "b", "flag": True, "cap": None}
    with pytest.raises(ValueError, match=r"^option 'k': must be an integer, got 'five'$") as e:
        coerce_options(D, {"k": "five"})
    assert e.value.__cause__ is None and e.value.__suppress_context__
    with pytest.raises(TypeError, match=r"^judge spec 'x' has no option\(s\) \['a', 'z'\]; options: \['k', 'mode', 'flag', 'cap'\]$"):
        coerce_options(D, {"z": "1", "a": "2", "k": "1"}, where="judge spec 'x'")


def test_options_refuse_bad_choices_and_non_finite_numbers_at_construction():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class D(Options):
        rate: float = option(0.5, "rate")
        modes: tuple[Literal["x", "y"], ...] = option(("x",), "modes")
        judge: Literal["auto"] | int = option("auto", "a choice or a number")
        count: int | None = option(None, "count")

        def __post_init__(self):
            super().__post_init__()
            self._at_least(0, "rate", strict=True)
            self._at_least(1, "count")

    assert D(modes=("y", "x"), judge=3, count=1, rate=1e-9).judge == 3
    for kw, message in [({"rate": float("nan")}, "option 'rate': must be a finite number, got nan"),
                        ({"rate": float("-inf")}, "option 'rate': must be a finite number, got -inf"),
                        ({"modes": ("x", "z")}, "option 'modes': must be one of x, y, got 'z'"),
                        ({"modes": ["z"]}, "option 'modes': must be one of x, y, got 'z'"),
                        ({"modes": "x"}, "option 'modes': must be a tuple of x|y, got 'x'"),  # not read letter by letter
                        ({"judge": "manual"}, "option 'judge': must be one of auto | int, got 'manual'"),
                        ({"rate": 0.0}, "option 'rate': must be > 0, got 0.0"),
                        ({"count": 0}, "option 'count': must be >= 1, got 0")]:
        with pytest.raises(ValueError, match=f"^{message}$"):
            D(**kw)
    assert D(count=None).count is None and D(count=1).count == 1  # None is not compared; the bound itself is allowed

    @dataclass(frozen=True)
    class Pair(Options):  # a fixed-length tuple: not checked element by element against its first type
        pair: tuple[Literal["a"], Literal["b"]] = option(("a", "b"), "pair")

    assert Pair().pair == ("a", "b")


def test_resolve_options_builds_replaces_or_refuses_another_class():
    from dataclasses import dataclass

    from rewardkit.options import resolve_options

    @dataclass(frozen=True)
    class D(Options):
        k: int = option(4, "votes")
        m: str = option("a", "m")

    @dataclass(frozen=True)
    class E(Options):
        k: int = option(4, "votes")

    base = D(k=2, m="b")
    assert resolve_options(D, None, {"k": 3}, "T") == D(k=3, m="a")
    assert resolve_options(D, base, {}, "T") is base
    assert resolve_options(D, base, {"k": 9}, "T") == D(k=9, m="b") and base.k == 2
    with pytest.raises(TypeError, match=r"^T: expected .*D or keyword options, got E \(pass e\.g\. judge=\.\.\. by name\)$"):
        resolve_options(D, E(), {}, "T")


def test_options_info_and_type_names_read_as_the_cli_shows_them():
    from dataclasses import dataclass

    from rewardkit.options import options_info, type_name

    @dataclass(frozen=True)
    class D(Options):
        mode: Literal["live", "round-robin"] = option("live", "schedule")
        ks: tuple[int, ...] = option((1, 2), "ks")
        cap: float | None = option(None, "cap")
        judge: HTTPBackend | str = option("smollm2", "judge")
        plain: int = 3  # declared without option(): no help

    assert [(i.name, i.type, i.default, i.help) for i in options_info(D)] == [
        ("mode", "live|round-robin", "live", "schedule"), ("ks", "int,...", (1, 2), "ks"),
        ("cap", "float | None", None, "cap"), ("judge", "HTTPBackend | str", "smollm2", "judge"),
        ("plain", "int", 3, "")]
    assert type_name(Optional[tuple[Literal["a"], ...]]) == "a,... | None"
    assert type_name(list[int]) == "list" and type_name(typing.Any) == "Any"
    assert type_name(tuple[int, str]) == "tuple"  # a fixed-length tuple is not "int,..."
    assert type_name(typing.ForwardRef("Judge")) == "ForwardRef('Judge')"  # no __name__: its text, unqualified


def test_a_tuple_option_given_a_bare_string_is_refused_not_read_as_its_letters():
    """``TTSOptions(methods="bt")`` was accepted, and ``rewardkit tts`` then ran the selectors whose names are
    substrings of it (``"bt" in "bt"``): a misspelt ``methods="tournement"`` ran none."""
    from rewardkit.raro.tts import TTSOptions

    for bad in ("bt", "tournement"):
        with pytest.raises(ValueError, match=f"^option 'methods': must be a tuple of tournament\\|bt, got '{bad}'$"):
            TTSOptions(methods=bad)
    assert TTSOptions(methods=["bt", "tournament"]).methods == ["bt", "tournament"]  # a list is a sequence too
