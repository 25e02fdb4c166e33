"""The notation registry (``derivations/symbols.py``) and what reads it: one meaning per letter, the printer, the layout data.

The build's use of the registry (a planted undeclared letter or duplicate
declaration fails ``sphinx-build -W``) is tested in ``test_build_checks.py``.
"""

import itertools
from pathlib import Path

import pytest
import sympy as sp

from derivations import Derivation
from derivations.notation import Notation, Symbol, exclusive, latex, latex_terms, symbols_of
from derivations.symbols import SYMBOLS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_registry_declares_each_letter_once_and_each_entry_in_full():
    reg = Notation(SYMBOLS)
    assert reg.problems() == []
    pages = {p.stem for p in DOCS.glob("*.rst")}
    for s in SYMBOLS:
        assert s.page in pages, s
        assert s.meaning and s.why and s.section, s
    # a local letter may have another meaning on another page, never a global one's
    globals_ = {k for s in SYMBOLS if not s.local for k in s.keys}
    assert not [s for s in SYMBOLS if s.local and set(s.keys) & globals_]


def test_an_entry_needs_a_meaning_a_page_a_reason_and_one_symbol():
    with pytest.raises(ValueError, match="why"):
        Symbol("q", "a probability", "returns")
    with pytest.raises(ValueError, match="exactly one symbol"):
        Symbol("q + p", "two letters", "returns", why="a slip")
    with pytest.raises(TypeError, match="forms"):
        Symbol("q", "a probability", "returns", why="q", forms="q_t")


def test_a_duplicate_is_named_with_both_meanings():
    reg = Notation([Symbol("A", "the advantage", "baselines", why="A for advantage"),
                    Symbol("A", "a matrix", "returns", why="A for a matrix"),
                    Symbol("c", "a constant", "losses", why="c", local=True),
                    Symbol("c", "a count", "losses", why="c", local=True),
                    Symbol("c", "a cap", "variants", why="c", local=True)])
    assert reg.problems() == [
        "'A' is declared twice: A (the advantage, page baselines) and A (a matrix, page returns)",
        "'c' is declared twice: c (a constant, local to losses) and c (a count, local to losses)",
    ]


def test_a_local_letter_is_declared_on_its_page_only():
    reg = Notation(SYMBOLS)
    assert reg.lookup("theta").page == "score_function" and not reg.lookup("theta").local
    assert reg.lookup("zeta", "losses").meaning.startswith("VESPO")
    assert reg.lookup("zeta", "returns") is None
    # labelled symbols: the clip's two sides are named symbols, and the bare letter is the symmetric clip
    eps = reg.lookup("epsilon_l")
    assert eps is not None and eps is reg.lookup("epsilon_h") and eps is reg.lookup("epsilon")
    assert reg.undeclared(r"\varepsilon_l + \varepsilon_h + \theta_a", "score_function") == []
    assert reg.undeclared(r"\zeta\, W", "returns") == ["zeta", "W"]


def test_what_counts_as_a_symbol():
    """Operators, fonts and named functions are not letters; an index is its own letter; a word subscript names a symbol."""
    assert symbols_of(r"\mathbb{E}_{o \sim \pi}[\log \pi_\theta(o)] + \operatorname{sg}(x) + \frac{\mathrm{d}}{\mathrm{d}\theta} f") == \
        ["o", "pi", "pi", "theta", "o", "x", "theta", "f"]
    assert symbols_of(r"\pi_{\mathrm{ref}} + w_{\mathrm{PPO}} + s_t") == ["pi_ref", "w_PPO", "s", "t"]
    assert symbols_of(r"\mathrm{KL}(\pi \,\|\, \mu) + \text{row } i") == ["pi", "mu", "i"]  # text is not a letter


def test_the_printer_speaks_the_notes_notation():
    a, j, x = sp.symbols("a j x")
    f, g = sp.Function("f"), sp.Function("g")
    assert latex(sp.KroneckerDelta(a, j)) == r"\mathbb{1}[a = j]"
    assert latex(sp.Derivative(f(x) * g(x), x)) == r"\frac{\mathrm{d}}{\mathrm{d} x} \left(f{\left(x \right)} g{\left(x \right)}\right)"
    assert latex(sp.Derivative(f(x), x)) == r"\frac{\mathrm{d} f{\left(x \right)}}{\mathrm{d} x}"
    assert latex_terms(a + j + x**2) == ["a", "+ j", "+ x^{2}"]


def test_a_piecewise_is_printed_with_conditions_that_do_not_overlap():
    r, A = sp.symbols("r A", real=True)
    pw = sp.Piecewise((r, (A > 0) & (r <= 2)), (0, (A > 0) | (r < 1)), (r, True))
    ex = exclusive(pw)
    for rv, av in itertools.product([sp.Rational(k, 2) for k in range(-2, 8)], [-1, 0, 1]):
        held = [c.subs({r: rv, A: av}) for _, c in ex.args]
        assert held.count(sp.true) == 1, (rv, av, held)
        assert ex.subs({r: rv, A: av}) == pw.subs({r: rv, A: av})


def test_the_layout_data_cuts_each_side_at_its_top_level_sums():
    x, y = sp.symbols("x y")
    d = Derivation("a square", start=(x + y) ** 2).then(x**2 + 2 * x * y + y**2, "the binomial formula; expand")
    d = d.then((x + y) ** 2, "factor")
    rows = d.rows()
    assert [row["lhs"] for row in rows] == [[r"\left(x + y\right)^{2}"], []]  # a continued chain shows its lhs once
    assert rows[0]["rhs"] == ["x^{2}", "+ 2 x y", "+ y^{2}"]
    assert rows[0]["rel"] == "=" and len(rows[0]["reason"]) == 2  # the reason, cut at its "; "
