r"""The notation registry's machinery: what a symbol is, and which symbols a formula uses.

Every letter the lecture notes print in a formula is a *symbol* of the
registry (:data:`derivations.symbols.SYMBOLS`): one meaning, the page that
defines it, its name in the code, and the reason for the letter.  The build
(``docs/_ext/notation.py``) reads every formula of every page — ``:math:``,
``.. math::``, the rendered derivations, the docstrings rendered into the
API page — cuts it into symbols with :func:`symbols_of`, and fails when one is
neither global nor declared locally on that page.

**What counts as one symbol.**  A Latin letter, a Greek letter (``\varepsilon``
and ``\epsilon`` are one letter) or ``\ell``, with its decorations: an accent
(``\bar r``, ``\tilde r``, ``\hat g``; ``\overline`` is ``\bar``), primes
(``a'``), a star (``b^*``), a font (``\mathcal{L}``, ``\mathbf{e}``), and a
subscript that is a *word* (``\pi_{\mathrm{old}}``, ``w_{\text{PPO}}``).  So
:math:`r`, :math:`\bar r` and :math:`r_{\mathrm{ref}}` are three symbols, and
each has its own entry.  A subscript or superscript that is not a word is made
of symbols itself (the index :math:`t` of :math:`s_t` is the symbol
:math:`t`); digits are numbers, not symbols.  Words in ``\text``,
``\mathrm``, ``\operatorname`` (``\mathrm{KL}``, ``\operatorname{sg}``) and
the operators :math:`\mathbb{E}`, :math:`\mathbb{1}` are not symbols.

A symbol's *key* is a short plain string: ``"r"``, ``"bar r"``, ``"pi_old"``,
``"cal L"``, ``"a'"``, ``"b*"``, ``"epsilon"``.

Examples
--------
>>> from derivations.notation import symbols_of
>>> symbols_of(r"\mathbb{E}_{o\sim\pi_\theta}[R(o)\, s_t]")
['o', 'pi', 'theta', 'R', 'o', 's', 't']
>>> symbols_of(r"\tilde r_i = \frac{\pi_{\mathrm{old}}}{\bar r'} \text{ for every } b^*")
['tilde r', 'i', 'pi_old', "bar r'", 'b*']
>>> symbols_of(r"w_{\mathrm{PPO}}(r, A) \le \varepsilon_l")
['w_PPO', 'r', 'A', 'epsilon', 'l']
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import sympy as sp
from sympy.printing.latex import LatexPrinter

__all__ = ["Notation", "Symbol", "exclusive", "latex", "latex_terms", "symbols_of"]

_GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu",
    "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega",
    "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega", "ell",
}
_VARIANTS = {"varepsilon": "epsilon", "vartheta": "theta", "varphi": "phi", "varrho": "rho",
             "varsigma": "sigma", "varpi": "pi"}
_UNICODE = dict(zip("αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΥΦΨΩℓϵϑφϱ",
                    ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
                     "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi",
                     "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi",
                     "Omega", "ell", "epsilon", "theta", "phi", "rho"]))
_ACCENTS = {"bar": "bar", "overline": "bar", "tilde": "tilde", "widetilde": "tilde", "hat": "hat",
            "widehat": "hat", "check": "check", "dot": "dot", "ddot": "ddot", "vec": "vec", "breve": "breve"}
_FONTS = {"mathcal": "cal", "mathbb": "bb", "mathscr": "scr", "mathbf": "bf", "boldsymbol": "bf",
          "mathfrak": "frak", "bm": "bf"}
# \mathbb letters that are operators or number sets, not symbols
_OPERATOR_LETTERS = {"E", "1", "R", "N", "Z", "Q", "P"}
_WORDS = {"text", "textrm", "mathrm", "operatorname", "mathtt", "texttt", "textbf", "textit", "mathit",
          "mathsf", "textsf", "textnormal", "emph"}
_WORD_SUBSCRIPT = {"text", "textrm", "mathrm", "operatorname"}
# commands whose argument is not mathematics (a colour, a label, a length)
_SKIP_ARGUMENT = {"color", "label", "tag", "hspace", "vspace", "kern", "mkern", "mspace", "hskip",
                  "textcolor", "ref", "eqref", "href", "class", "cssId", "style", "unicode"}
_COLUMN_SPEC = {"array", "tabular", "alignat", "alignedat"}
_COMMAND = re.compile(r"\\([A-Za-z]+)\*?|\\.|\\$")
# the d of a derivative d/dx (d^2/dx^2) is an operator, not the symbol d
_DIFFERENTIAL = re.compile(r"\\[dt]?frac\s*\{\s*d(\s*\^\s*\{?\s*\d+\s*\}?)?\s*\}\s*\{\s*d(?![A-Za-z]{2})")


def _group(s: str, i: int) -> tuple[str, int]:
    """``s[i]`` is ``{``: the group's content and the index after its closing brace."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1:j], j + 1
        j += 1
    return s[i + 1:], len(s)


def _argument(s: str, i: int) -> tuple[str, int]:
    """The next argument of a command: a group's content, a command, or one character."""
    while i < len(s) and s[i].isspace():
        i += 1
    if i >= len(s):
        return "", i
    if s[i] == "{":
        return _group(s, i)
    if s[i] == "\\":
        m = _match_command(s, i)
        return m.group(0), m.end()
    return s[i], i + 1


def _match_command(s: str, i: int) -> re.Match:
    """The command at ``s[i] == "\\"`` (a lone backslash at the end is one too)."""
    m = _COMMAND.match(s, i)
    assert m is not None  # the pattern matches every backslash
    return m


def _word(arg: str) -> str | None:
    r"""The word of a subscript made of one ``\text{..}``/``\mathrm{..}`` (possibly followed by more), else None."""
    m = re.match(r"\s*\\(text|textrm|mathrm|operatorname)\s*\{([^{}]*)\}", arg)
    if m and len(m.group(2).strip()) >= 1 and m.group(2).strip().replace("-", "").replace(" ", "").isalnum():
        return m.group(2).strip()
    return None


def _decorated(s: str, i: int, key: str, out: list, labels=None) -> int:
    """Append ``key`` with the primes, star and word or label subscript that follow it; return the index after them."""
    while True:
        m = re.match(r"\s*(?:'|\^\s*\\prime\b|\^\s*\{\s*\\prime\s*\})", s[i:])
        if m:
            key += "'"
            i += m.end()
            continue
        m = re.match(r"\s*\^\s*(?:\*|\\ast\b|\{\s*(?:\*|\\ast)\s*\})", s[i:])
        if m:
            key += "*"
            i += m.end()
            continue
        break
    m = re.match(r"\s*_\s*", s[i:])
    if m:
        j = i + m.end()
        if s.startswith("\\", j) and re.match(r"\\(text|textrm|mathrm|operatorname)\b", s[j:]):
            command = _match_command(s, j)
            word, end = _argument(s, command.end())
            if word.strip():
                out.append(f"{key}_{word.strip()}")
                return end
        label, end = _argument(s, j)
        if labels and label.strip() in labels.get(key, ()):
            out.append(f"{key}_{label.strip()}")
            return end
        if s.startswith("{", j):
            content, end = _group(s, j)
            named = _word(content)
            if named is not None:
                out.append(f"{key}_{named}")
                rest = re.sub(r"^\s*\\(text|textrm|mathrm|operatorname)\s*\{[^{}]*\}", "", content)
                _scan(rest, out, labels)
                return end
    out.append(key)
    return i


def _scan(s: str, out: list, labels=None) -> list:
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            m = _match_command(s, i)
            i = m.end()
            name = m.group(1)
            if name is None:
                continue
            if name in _GREEK or name in _VARIANTS:
                i = _decorated(s, i, _VARIANTS.get(name, name), out, labels)
            elif name in _ACCENTS:
                inner, i = _argument(s, i)
                found = _scan(inner, [], labels)
                if len(found) == 1:
                    i = _decorated(s, i, f"{_ACCENTS[name]} {found[0]}", out, labels)
                else:
                    out.extend(found)
            elif name in _FONTS:
                inner, i = _argument(s, i)
                inner = inner.strip()
                if inner in _OPERATOR_LETTERS:
                    continue
                found = _scan(inner, [], labels)
                if len(found) == 1 and len(inner) <= 2:
                    i = _decorated(s, i, f"{_FONTS[name]} {found[0]}", out, labels)
                else:
                    out.extend(found)
            elif name in _WORDS:
                _, i = _argument(s, i)
            elif name in _SKIP_ARGUMENT:
                _, i = _argument(s, i)
            elif name == "begin":
                env, i = _argument(s, i)
                if env.strip() in _COLUMN_SPEC:
                    _, i = _argument(s, i)
            elif name == "end":
                _, i = _argument(s, i)
            continue
        if c.isascii() and c.isalpha():
            i = _decorated(s, i + 1, c, out, labels)
            continue
        if c in _UNICODE:
            i = _decorated(s, i + 1, _UNICODE[c], out, labels)
            continue
        i += 1
    return out


def symbols_of(latex: str, labels=None) -> list[str]:
    r"""The keys of the symbols a LaTeX formula uses, in order, with repeats (see the module docstring).

    Examples
    --------
    >>> symbols_of(r"\begin{array}{cc} \mathcal{L}_{\text{token-mean}} & \mathbb{1}[u \ge t] \end{array}")
    ['cal L_token-mean', 'u', 't']
    """
    if not isinstance(latex, str):
        raise TypeError(f"latex: expected a str, got {type(latex).__name__}")
    return _scan(_DIFFERENTIAL.sub(r"\\frac{\1}{", latex), [], labels)


@dataclass(frozen=True)
class Symbol:
    r"""One symbol of the notes: its one meaning, the page that defines it, its name in code, why this letter.

    Parameters
    ----------
    latex : str
        The symbol as the pages print it (``r"\pi_{\mathrm{old}}"``); it must
        be one symbol (:func:`symbols_of` finds exactly one key in it).
    meaning : str
        Its one meaning, in words (``:math:`` and ``:doc:`` roles allowed: the
        Notation page renders it).
    page : str
        The page that defines it (a document name: ``"returns"``).
    code : str
        Its name in the code (a parameter, a function, a SymPy name); may be empty.
    why : str
        The reason for the letter: where the field uses it, or which clash it
        avoids (required: the Notation page shows it).
    section : str
        The heading of the Notation page it is listed under.
    forms : tuple of str
        Other ways the pages print it (indexed, applied), shown beside it.
    local : bool
        Declared on ``page`` only (shown in that page's "Local notation" box).
        Another page may declare the same letter locally with its own meaning;
        no page may reuse a global letter.
    subscripts : bool
        Any word subscript is a form of this symbol (``w_{\mathrm{PPO}}`` for ``w``).
    labels : tuple of str
        Subscripts that make a *named* symbol rather than an index:
        ``k_1, k_2, k_3`` (labels ``1, 2, 3``) are the KL estimators,
        ``\varepsilon_l, \varepsilon_h`` the two clip parameters.
    bare : bool
        With labels: whether the letter without a label is this symbol too
        (:math:`\varepsilon`, the symmetric clip, yes; :math:`k`, no).
    """

    latex: str
    meaning: str
    page: str
    code: str = ""
    why: str = ""
    section: str = "Other"
    forms: tuple = ()
    local: bool = False
    subscripts: bool = False
    labels: tuple = ()
    bare: bool = True
    key: str = field(init=False, compare=False)
    keys: tuple = field(init=False, compare=False)

    def __post_init__(self):
        for name in ("latex", "meaning", "page", "code", "why", "section"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Symbol.{name}: expected a str, got {type(getattr(self, name)).__name__}")
        if not self.meaning or not self.page or not self.why:
            raise ValueError(f"Symbol {self.latex!r}: meaning, page and why (the reason for the letter) must not be empty")
        for name in ("forms", "labels"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(f, str) for f in value):
                raise TypeError(f"Symbol {self.latex!r}: {name} must be a tuple of str, got {value!r}")
        plain = symbols_of(self.latex)
        base = plain[0].partition("_")[0] if plain else ""
        keys = symbols_of(self.latex, {base: self.labels}) if self.labels else plain
        if len(keys) != 1:
            raise ValueError(f"Symbol {self.latex!r}: latex must print exactly one symbol, it prints {keys}")
        object.__setattr__(self, "key", keys[0])
        if self.labels:
            named = tuple(f"{base}_{label}" for label in self.labels)
            object.__setattr__(self, "keys", ((base,) if self.bare else ()) + named)
        else:
            object.__setattr__(self, "keys", (keys[0],))

    @property
    def base(self) -> str:
        """The letter a label attaches to (``"k"`` for ``k_1``)."""
        return self.key.partition("_")[0] if self.labels else self.key


class Notation:
    """The registry: symbols by key and page, the problems a build reports, and what a formula leaves undeclared.

    Parameters
    ----------
    symbols : iterable of Symbol

    Examples
    --------
    >>> from derivations.notation import Notation, Symbol
    >>> reg = Notation([Symbol("r", "the importance ratio", "gradient_weights", why="r for ratio"),
    ...                 Symbol("k_1", "a KL estimator", "trust_region", why="Schulman's k1, k2, k3",
    ...                        labels=("1", "2", "3"), bare=False),
    ...                 Symbol(r"\\eta", "a step size", "losses", why="the optimisers' eta", local=True)])
    >>> reg.undeclared(r"r = \\eta x + k_3", page="losses")
    ['x']
    >>> reg.undeclared(r"\\eta\\, k", page="returns")
    ['eta', 'k']
    >>> Notation([Symbol("r", "a ratio", "a", why="ratio"), Symbol("r", "a reward", "b", why="reward", local=True)]).problems()
    ["'r' is declared twice: r (a ratio, page a) and r (a reward, local to b)"]
    """

    def __init__(self, symbols: Iterable[Symbol]):
        self.symbols = tuple(symbols)
        for s in self.symbols:
            if not isinstance(s, Symbol):
                raise TypeError(f"symbols: expected Symbol entries, got {type(s).__name__}")
        self.labels: dict[str, tuple] = {}
        for s in self.symbols:
            if s.labels:
                self.labels[s.base] = tuple(dict.fromkeys((*self.labels.get(s.base, ()), *s.labels)))
        self._global: dict[str, Symbol] = {}
        self._local: dict[tuple[str, str], Symbol] = {}
        for s in self.symbols:
            for key in s.keys:
                if s.local:
                    self._local.setdefault((s.page, key), s)
                else:
                    self._global.setdefault(key, s)

    def keys_of(self, latex: str) -> list[str]:
        """The symbols of a formula, with this registry's labels (``k_1`` is one symbol)."""
        return symbols_of(latex, self.labels)

    def problems(self) -> list[str]:
        """Each letter declared twice: two global entries, a local entry reusing a global letter, or twice on one page."""
        def where(s):
            return f"local to {s.page}" if s.local else f"page {s.page}"

        seen: dict[tuple, Symbol] = {}
        out = []
        for s in self.symbols:
            for key in s.keys:
                clash = self._global.get(key) if s.local else None
                index = ("global", key) if not s.local else (s.page, key)
                first = seen.get(index) or seen.get(("global", key)) or clash
                if first is not None and first is not s:
                    out.append(f"{key!r} is declared twice: {first.latex} ({first.meaning}, {where(first)}) "
                               f"and {s.latex} ({s.meaning}, {where(s)})")
                seen.setdefault(index, s)
        return out

    def lookup(self, key: str, page: str | None = None) -> Symbol | None:
        """The symbol ``key`` names on ``page``: global, else local there (a word subscript falls back to a symbol that takes any)."""
        for k in (key, key.partition("_")[0]):
            s = self._global.get(k) or (self._local.get((page, k)) if page is not None else None)
            if s is not None and (k == key or (s.subscripts and "_" in key)):
                return s
        return None

    def declared(self, key: str, page: str) -> bool:
        """Whether ``key`` may be used on ``page``: a global symbol, or one declared locally there."""
        return self.lookup(key, page) is not None

    def undeclared(self, latex: str, page: str) -> list[str]:
        """The keys of ``latex`` that ``page`` may not use, each once, in order."""
        out: list[str] = []
        for key in self.keys_of(latex):
            if not self.declared(key, page) and key not in out:
                out.append(key)
        return out

    def local_to(self, page: str) -> list[Symbol]:
        """The symbols declared locally on ``page``."""
        return [s for s in self.symbols if s.local and s.page == page]

    def global_symbols(self) -> list[Symbol]:
        return [s for s in self.symbols if not s.local]

    def sections(self) -> dict[str, list[Symbol]]:
        """The global symbols by Notation-page section, in registry order."""
        out: dict[str, list[Symbol]] = {}
        for s in self.global_symbols():
            out.setdefault(s.section, []).append(s)
        return out


_FLIP = {sp.GreaterThan: sp.LessThan, sp.LessThan: sp.GreaterThan, sp.StrictGreaterThan: sp.StrictLessThan,
         sp.StrictLessThan: sp.StrictGreaterThan}


def _isolated(rel, weight):
    """``rel`` with its most-used symbol alone on the left (``r - eps_h <= 1`` as ``r <= eps_h + 1``)."""
    if type(rel) not in _FLIP:
        return rel
    gap = rel.lhs - rel.rhs
    symbols = sorted(gap.free_symbols, key=lambda x: (-weight.get(x, 0), str(x)))
    if not symbols:
        return rel
    x = symbols[0]
    coeff = gap.coeff(x)
    if not (coeff.is_number and coeff != 0 and sp.diff(gap, x) == coeff):
        return rel
    bound = -(gap - coeff * x) / coeff
    return type(rel)(x, bound) if coeff > 0 else _FLIP[type(rel)](x, bound)


def exclusive(pw: sp.Piecewise) -> sp.Piecewise:
    """The same ``Piecewise`` with conditions that do not overlap: each branch says where it holds, read in any order.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.notation import exclusive
    >>> r, A = sp.symbols("r A", real=True)
    >>> exclusive(sp.Piecewise((r, (A > 0) & (r <= 2)), (0, (A > 0) | (r < 1)), (r, True)))
    Piecewise((r, (r <= 2) & (A > 0)), (0, ((A <= 0) & (r < 1)) | ((A > 0) & (r > 2))), (r, (r >= 1) & (A <= 0)))
    """
    relations = [rel for _, c in pw.args for rel in c.atoms(sp.core.relational.Relational)]
    weight: dict = {}
    for rel in relations:
        for x in rel.free_symbols:
            weight[x] = weight.get(x, 0) + 1
    branches: list = []
    before: list = []
    for value, condition in pw.args:
        alone = sp.And(condition, *[sp.Not(c) for c in before]) if before else condition
        before.append(condition)
        alone = sp.simplify_logic(alone, force=True) if alone not in (sp.true, sp.false) else alone
        if alone is sp.false:
            continue
        if alone is not sp.true:
            alone = alone.replace(lambda e: isinstance(e, sp.core.relational.Relational), lambda e: _isolated(e, weight))
        branches.append((value, alone))
    return sp.Piecewise(*branches, evaluate=False)


class _NotesPrinter(LatexPrinter):
    """SymPy's LaTeX, in the notes' notation: the indicator for a Kronecker delta, bracketed derivative scopes,
    a ``Piecewise`` with conditions that do not overlap."""

    def _print_Piecewise(self, expr):
        return super()._print_Piecewise(exclusive(expr))

    def _print_KroneckerDelta(self, expr, exp=None):
        i, j = (self._print(a) for a in expr.args)
        tex = rf"\mathbb{{1}}[{i} = {j}]"
        return rf"{tex}^{{{exp}}}" if exp is not None else tex

    def _print_Derivative(self, expr):
        from sympy.printing.conventions import requires_partial

        d = r"\partial" if requires_partial(expr.expr) else self._settings["diff_operator_latex"]
        order = sum(n for _, n in expr.variable_count)
        below = " ".join(f"{d} {self._print(x)}" if n == 1 else f"{d} {self.parenthesize_super(self._print(x))}^{{{n}}}"
                         for x, n in reversed(expr.variable_count))
        top = d if order == 1 else f"{d}^{{{order}}}"
        body = expr.expr
        simple = body.is_Atom or (isinstance(body, (sp.Indexed, sp.Function)) and not isinstance(body, sp.Piecewise))
        if simple:  # the function goes into the numerator: no doubt about what is differentiated
            return rf"\frac{{{top} {self._print(body)}}}{{{below}}}"
        return rf"\frac{{{top}}}{{{below}}} \left({self._print(body)}\right)"


_PRINTER = _NotesPrinter({"diff_operator": "rd"})  # an upright d: the operator, not the symbol d


def latex(expr) -> str:
    r"""``sympy.latex`` in the notes' notation.

    The Kronecker delta is printed as the indicator :math:`\mathbb{1}[a = j]`
    (:math:`\delta` is the TD error), and a derivative brackets what it
    differentiates unless that is one symbol or one function call.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.notation import latex
    >>> a, j, th = sp.symbols("a j theta")
    >>> f, pi = sp.IndexedBase("f"), sp.IndexedBase("pi")
    >>> latex(sp.KroneckerDelta(a, j) - pi[j])
    '\\mathbb{1}[a = j] - {\\pi}_{j}'
    >>> latex(sp.Derivative(f[a] * pi[a], th))
    '\\frac{\\partial}{\\partial \\theta} \\left({f}_{a} {\\pi}_{a}\\right)'
    >>> latex(sp.Derivative(pi[a], th))
    '\\frac{\\partial {\\pi}_{a}}{\\partial \\theta}'
    """
    return _PRINTER.doprint(expr)


def latex_terms(expr) -> list[str]:
    r"""``expr``'s LaTeX cut at its top-level sum: the places where a long line may break.

    The pieces joined with spaces read as :func:`latex` of ``expr``; every piece
    after the first starts with its sign.  A sum (or a product) whose argument is
    a sum is cut inside its bracket, written ``\Bigl( ... \Bigr)`` so that the
    two halves of the bracket may stand on different lines.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.notation import latex_terms
    >>> x, y = sp.symbols("x y")
    >>> latex_terms(x**2 - 2 * x * y + 1)
    ['x^{2}', '- 2 x y', '+ 1']
    >>> latex_terms(x * y)
    ['x y']
    >>> latex_terms(sp.Sum(x + y, (x, 1, 3)))
    ['\\sum_{x=1}^{3}  \\Bigl(x', '+ y \\Bigr)']
    """
    expr = sp.sympify(expr)
    if isinstance(expr, sp.Add):
        return _add_terms(expr)
    if isinstance(expr, sp.Sum) and isinstance(expr.function, sp.Add):
        head = latex(sp.Sum(sp.Symbol("BODY"), *expr.limits))
        return _bracketed(head.replace("BODY", ""), expr.function)
    if isinstance(expr, sp.Mul):
        sums = [f for f in expr.args if isinstance(f, sp.Add)]
        if len(sums) == 1:
            rest = sp.Mul(*[f for f in expr.args if f is not sums[0]])
            head = "" if rest == 1 else ("-" if rest == -1 else latex(rest))
            return _bracketed(head, sums[0])
    return [latex(expr)]


def _add_terms(expr) -> list[str]:
    out = []
    for k, term in enumerate(_PRINTER._as_ordered_terms(expr, order=None)):
        sign = ""
        if k and term.could_extract_minus_sign():
            sign, term = "- ", -term
        elif k:
            sign = "+ "
        tex = _PRINTER._print(term)
        if _PRINTER._needs_add_brackets(term):
            tex = rf"\left({tex}\right)"
        out.append(sign + tex)
    return out


def _bracketed(head: str, body) -> list[str]:
    """``head (t_1 + t_2 + ...)`` cut between the terms, with brackets that need no pairing on one line."""
    terms = _add_terms(body)
    if len(terms) == 1:
        return [rf"{head} \left({terms[0]}\right)"]
    return [rf"{head} \Bigl({terms[0]}", *terms[1:-1], rf"{terms[-1]} \Bigr)"]
