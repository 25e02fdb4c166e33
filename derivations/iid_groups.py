r"""The i.i.d. group algebra: expectations over :math:`G` independent answers, :math:`G` symbolic.

A trainer samples :math:`G` answers to one prompt, independently from the same
policy.  Answer :math:`j` carries per-answer random quantities — its reward
:math:`R_j`, its score :math:`s_j = \nabla_\theta \log \pi_\theta(o_j)` (one
coordinate), or any others — written as ``IndexedBase`` entries ``R[j]``,
``s[j]``.  An estimator is a polynomial in them, possibly with sums
:math:`\sum_{j=1}^{G}` over the group.  :meth:`IIDGroup.expect` takes its
expectation with six rules, and nothing else:

1. **linearity**: constants (anything free of the random quantities) come out;
2. **a summation index is either bound or fresh**: in
   :math:`\sum_{j=1}^{G} f(j)`, the index :math:`j` equals one of the indices
   already bound (the answer :math:`i` under study, say) or it is a new
   answer, distinct from all of them; the fresh case occurs
   :math:`G - \#\text{bound}` times and every fresh answer has the same law,
   so
   :math:`\mathbb{E}\sum_j f(j) = \sum_{b\ \text{bound}} \mathbb{E} f(b)
   + (G - \#\text{bound})\, \mathbb{E} f(j_\text{fresh})`;
3. **independence**: a product over *distinct* answers factorises;
4. **identical moments**: every answer has the same single-sample moments,
   written :math:`\mathbb{E}[R\, s]`, :math:`\mathbb{E}[R]`, ... with plain
   (unindexed) symbols.

The last two reach beyond polynomials:

5. **a sum over a count** :math:`\sum_{k=a}^{b}` whose index is not an answer
   (finitely many terms, :math:`b` may be symbolic): linearity,
   :math:`\mathbb{E}\sum_k f(k) = \sum_k \mathbb{E} f(k)`;
6. **a function of the other answers**: :class:`OthersTotal`
   :math:`S_{-i} = \sum_{j \ne i} R_j` depends on the answers other than
   :math:`i` only, so a product :math:`\phi(S_{-i})\, \psi(R_i, s_i)` of any
   function of it and a polynomial in answer :math:`i`'s own quantities
   factorises, :math:`\mathbb{E}[\phi(S_{-i})]\, \mathbb{E}[\psi(R, s)]`, with
   :math:`\mathbb{E}[\phi(S_{-i})]` left as it is (notation, such as
   :math:`\Pr[S_{-i} = k] = \mathbb{E}[\mathbb{1}[S_{-i} = k]]`).  Any other
   term with :math:`S_{-i}` (one that also holds :math:`R_j`, :math:`j \ne i`,
   or :math:`S_{-i}` inside a function of :math:`R_i`) is refused.

Distinct free indices (``i`` and ``k``) denote distinct answers.  Facts such as
:math:`\mathbb{E}[s] = 0` are *not* built in: a derivation states them as a
step, so the page shows where they enter.

:meth:`IIDGroup.brute_force` is the independent check: at a concrete small
:math:`G`, it enumerates all :math:`K^G` outcomes of the group for a
distribution over :math:`K` outcomes.

``sympy.stats`` is not used: its ``Expectation`` applies linearity but not
independence, and with a symbolic index it returns
:math:`\mathbb{E}[B_1 B_j] = p^2`, which is wrong at :math:`j = 1`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import sympy as sp

from ._validate import require_int
from .definitions import Definitions, GroupExpectation

__all__ = ["Expect", "IIDGroup", "OthersTotal"]


class Expect(sp.Function):
    r"""An unevaluated expectation :math:`\mathbb{E}[x]`.

    With indexed arguments (``R[i]*s[i]``) it is notation that
    :meth:`IIDGroup.unfold` evaluates; with plain symbols (``R*s``) it is a
    single-sample moment, an atom of the results.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.iid_groups import Expect
    >>> R, s = sp.symbols("R s", real=True)
    >>> sp.latex(Expect(R * s))
    '\\mathbb{E}\\left[R s\\right]'
    >>> Expect(sp.Integer(3))
    3
    """

    nargs = 1

    @classmethod
    def eval(cls, x: sp.Basic) -> sp.Basic | None:
        if x.is_number:
            return x
        return None

    def _latex(self, printer):
        return r"\mathbb{E}\left[" + printer._print(self.args[0]) + r"\right]"


class OthersTotal(sp.Function):
    r""":math:`S_{-i} = \sum_{j \ne i} X_j`: the total of the quantity ``quantity`` over the answers other than :math:`i`.

    Notation for a function of the other answers only, which is what the group
    algebra's independence rule reads off it; ``OthersTotal(i)``.  The
    quantity is a class attribute (``"R"`` here): a subclass names another
    quantity, or its own symbol on the page.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.iid_groups import Expect, IIDGroup, OthersTotal
    >>> grp = IIDGroup()
    >>> S, k = OthersTotal(grp.i), sp.Symbol("k")
    >>> grp.expect(sp.KroneckerDelta(S, k) * grp.R[grp.i] * grp.s[grp.i])
    Expect(R*s)*Expect(KroneckerDelta(k, OthersTotal(i)))
    >>> grp.expect(sp.KroneckerDelta(S, k) * grp.R[sp.Symbol("m")])
    Traceback (most recent call last):
    ...
    ValueError: expr: a function of the answers other than i factorises only from answer i's own quantities; KroneckerDelta(k, OthersTotal(i))*R[m] mixes it with answer m
    """

    nargs = 1
    quantity = "R"

    def _latex(self, printer):
        i = printer._print(self.args[0])
        return rf"\textstyle\sum_{{j \ne {i}}} {self.quantity}_j"


class IIDGroup:
    r"""A group of :math:`G` i.i.d. answers with per-answer random quantities.

    Parameters
    ----------
    names : sequence of str
        Names of the per-answer random quantities (default reward ``R`` and
        score coordinate ``s``).
    G : int or None
        The group size; ``None`` (default) makes it a positive integer symbol.

    Attributes
    ----------
    G : sympy expression
        Group size.
    i : sympy.Symbol
        The answer under study.
    j : sympy.Symbol
        The summation index over the group's answers.

    Examples
    --------
    The leave-one-out estimator has mean :math:`\mathbb{E}[Rs] - \mathbb{E}[R]\mathbb{E}[s]`
    for every :math:`G`:

    >>> import sympy as sp
    >>> from derivations.iid_groups import IIDGroup
    >>> grp = IIDGroup()
    >>> R, s, i = grp.R, grp.s, grp.i
    >>> sp.simplify(grp.expect((R[i] - grp.mean_others(i)) * s[i]))
    -Expect(R)*Expect(s) + Expect(R*s)
    >>> sp.factor(grp.expect((R[i] - grp.mean()) * s[i]))
    -(G - 1)*(Expect(R)*Expect(s) - Expect(R*s))/G
    """

    def __init__(self, names: Sequence[str] = ("R", "s"), G: int | None = None) -> None:
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise TypeError(f"names must be a sequence of quantity names such as ('R', 's'), got {names!r}")
        names = tuple(names)
        if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
            raise TypeError(f"names must be a non-empty sequence of identifiers, got {names!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"names must be distinct, got {names!r}")
        if G is None:
            G = sp.Symbol("G", integer=True, positive=True)
        else:
            require_int("G", G, minimum=1)
        self.G = sp.sympify(G)
        self.i = sp.Symbol("i", integer=True, positive=True)
        self.j = sp.Symbol("j", integer=True, positive=True)
        self.bases = {n: sp.IndexedBase(n, real=True) for n in names}
        self.plain = {n: sp.Symbol(n, real=True) for n in names}
        self._plain_of = {b: self.plain[n] for n, b in self.bases.items()}

    def __getattr__(self, name):
        bases = self.__dict__.get("bases", {})
        if name in bases:
            return bases[name]
        raise AttributeError(name)

    # -- notation -------------------------------------------------------------------------
    def total(self, name: str = "R") -> sp.Sum:
        r""":math:`\sum_{j=1}^{G} X_j` for the quantity ``name``."""
        return sp.Sum(self._base(name)[self.j], (self.j, 1, self.G))

    def mean(self, name: str = "R") -> sp.Expr:
        r"""Group mean including every answer, :math:`\frac1G \sum_{j=1}^{G} X_j`."""
        return self.total(name) / self.G

    def mean_others(self, i: sp.Basic | int, name: str = "R") -> sp.Expr:
        r"""Mean of the other answers, :math:`\frac{1}{G-1}\bigl(\sum_{j=1}^{G} X_j - X_i\bigr)`."""
        return (self.total(name) - self._base(name)[i]) / (self.G - 1)

    def moment(self, expr: sp.Basic) -> sp.Expr:
        r"""The single-sample moment :math:`\mathbb{E}[x]` of a plain expression (``R*s``)."""
        return Expect(sp.sympify(expr))

    def _base(self, name: str) -> sp.IndexedBase:
        if name not in self.bases:
            raise ValueError(f"name must be one of {sorted(self.bases)}, got {name!r}")
        return self.bases[name]

    # -- the expectation operator ---------------------------------------------------------
    def expect(self, expr: sp.Basic) -> sp.Expr:
        r""":math:`\mathbb{E}[\text{expr}]` in single-sample moments.

        ``expr`` is a polynomial in the indexed quantities, possibly with sums
        :math:`\sum_{j=1}^{G}`; free indices are distinct answers.

        Raises
        ------
        ValueError
            If a random quantity sits inside a non-polynomial function
            (``sqrt(R[i])``), or a sum does not run over :math:`1..G`.
        """
        expr = sp.sympify(expr)
        return sp.expand(self._expect(expr, self._free_indices(expr)))

    def _free_indices(self, expr) -> tuple:
        found = []
        for atom in sorted(expr.atoms(sp.Indexed), key=sp.default_sort_key):
            if atom.base in self._plain_of:
                (idx,) = atom.indices
                if (idx.is_number or idx in expr.free_symbols) and idx not in found:
                    found.append(idx)
        for total in sorted(expr.atoms(OthersTotal), key=sp.default_sort_key):
            (idx,) = total.args
            if (idx.is_number or idx in expr.free_symbols) and idx not in found:
                found.append(idx)
        return tuple(found)

    def _expect(self, expr, bound: tuple) -> sp.Expr:
        expr = sp.expand(expr)
        return sp.Add(*[self._expect_term(t, bound) for t in sp.Add.make_args(expr)])

    def _expect_term(self, term, bound: tuple) -> sp.Expr:
        for f in sp.Mul.make_args(term):
            base, exp = f.as_base_exp()
            if isinstance(base, sp.Sum) and exp.is_Integer and exp > 0:
                if self._over_answers(base):
                    return self._expect_sum(term, base, bound)
                return self._expect_count_sum(term, base, exp, bound)
        const: sp.Expr = sp.Integer(1)
        per_answer: dict[sp.Basic, sp.Expr] = {}
        others: dict[sp.Basic, sp.Expr] = {}
        for f in sp.Mul.make_args(term):
            base, exp = f.as_base_exp()
            if isinstance(base, sp.Indexed) and base.base in self._plain_of:
                if not (exp.is_Integer and exp > 0):
                    raise ValueError(f"expr must be a polynomial in the group's quantities; cannot take E of {f}")
                (idx,) = base.indices
                per_answer[idx] = per_answer.get(idx, 1) * self._plain_of[base.base] ** exp
            elif self._is_random(f):
                b = self._others_of(f)
                others[b] = others.get(b, 1) * f
            else:
                const *= f
        if others:  # independence of answer b from a function of the others
            (b, h), *more = others.items()
            mixed = [c for c, _ in more] + [c for c in per_answer if c != b]
            if mixed:
                raise ValueError(f"expr: a function of the answers other than {b} factorises only from answer {b}'s own quantities; "
                                 f"{sp.sstr(term)} mixes it with answer {mixed[0]}")
            return const * Expect(h) * sp.Mul(*[self.moment(m) for m in per_answer.values()])
        # independence: distinct answers factorise; identical law: same moments
        return const * sp.Mul(*[self.moment(m) for m in per_answer.values()])

    def _others_of(self, f) -> sp.Basic:
        """The answer ``b`` when ``f`` is a function of the answers other than ``b`` only (of ``OthersTotal(b)``), else ValueError."""
        answers = {t.args[0] for t in f.atoms(OthersTotal)}
        if len(answers) != 1 or any(a.base in self._plain_of for a in f.atoms(sp.Indexed)):
            raise ValueError(f"expr must be a polynomial in the group's quantities, or a function of the answers other than one answer "
                             f"times a polynomial in that answer's own; cannot take E of {sp.sstr(f)}")
        for t in f.atoms(OthersTotal):
            if t.quantity not in self.bases:
                raise ValueError(f"expr: {sp.sstr(t)} totals the quantity {t.quantity!r}, which is not one of the group's {sorted(self.bases)}")
        return next(iter(answers))

    def _over_answers(self, S: sp.Sum) -> bool:
        """Whether the sum's index labels answers (it indexes a group quantity, or an ``OthersTotal``)."""
        x = S.limits[0][0]
        return (any(a.base in self._plain_of and x in a.indices for a in S.function.atoms(sp.Indexed))
                or any(t.args[0] == x for t in S.function.atoms(OthersTotal)))

    def _expect_count_sum(self, term, S: sp.Sum, exp, bound: tuple) -> sp.Expr:
        r"""Linearity through :math:`\sum_{k=a}^{b}` over a count (not an answer): finitely many terms, so :math:`\mathbb{E}` moves inside."""
        if len(S.limits) != 1 or exp != 1:
            raise ValueError(f"expr: a sum over a count must be a single sum to the first power, got {sp.sstr(S)}**{exp}")
        (x, lo, hi), = S.limits
        if lo.has(sp.oo, -sp.oo, sp.zoo) or hi.has(sp.oo, -sp.oo, sp.zoo):
            raise ValueError(f"expr: a sum over a count must have finite limits (E moves inside a finite sum only), got {sp.sstr(S)}")
        rest = term / S
        if rest.has(x):
            raise ValueError(f"expr: the index {x} of {sp.sstr(S)} is also free outside it")
        return sp.Sum(self._expect(rest * S.function, bound), (x, lo, hi))

    def _expect_sum(self, term, S: sp.Sum, bound: tuple) -> sp.Expr:
        (x, lo, hi), = S.limits
        if lo != 1 or sp.simplify(hi - self.G) != 0:
            raise ValueError(f"sums must run over the group j = 1..G, got {S}")
        rest = term / S
        out = sum((self._expect(rest * S.function.xreplace({x: b}), bound) for b in bound), sp.Integer(0))
        if self.G.is_number and self.G - len(bound) <= 0:
            return out
        fresh = sp.Symbol(f"j_{len(bound)}", integer=True, positive=True)
        return out + (self.G - len(bound)) * self._expect(rest * S.function.xreplace({x: fresh}), bound + (fresh,))

    def _is_random(self, expr) -> bool:
        return any(a.base in self._plain_of for a in expr.atoms(sp.Indexed)) or bool(expr.atoms(OthersTotal))

    # -- notation -> definitions (the kernel's GroupExpectation rule) ---------------------
    @property
    def definitions(self) -> Definitions:
        """This group's expectation algebra as the kernel's rule, for ``Derivation(unfold=...)``."""
        return Definitions((), GroupExpectation(tuple(self.bases), int(self.G) if self.G.is_number else None))

    def unfold(self, expr: sp.Basic) -> sp.Expr:
        r"""Evaluate every :class:`Expect` of indexed quantities; expand plain moments by linearity.

        A ``Sum`` of expectations is first moved inside the expectation
        (linearity), so :math:`\sum_j \mathbb{E}[R_j s_i]` is evaluated as
        :math:`\mathbb{E}[\sum_j R_j s_i]`.
        """
        expr = sp.sympify(expr)
        expr = expr.replace(lambda e: isinstance(e, sp.Sum) and self._has_group_expectation(e), self._sum_inside)
        expr = expr.replace(
            lambda e: isinstance(e, Expect) and self._is_random(e.args[0]),
            lambda e: self.expect(e.args[0]),
        )
        return expr.replace(lambda e: isinstance(e, Expect) and not _is_monomial(e.args[0]), self._plain_linearity)

    def expect_separable(self, expr: sp.Basic, answer: int = 1) -> sp.Expr:
        r""":math:`\mathbb{E}[\text{expr}]` at a number :math:`G`: a polynomial in ``answer``'s quantities times any function of the others.

        Each term is :math:`\psi(X_i)\,\phi(X_{\ne i})`; independence gives
        :math:`\mathbb{E}[\psi]\,\mathbb{E}[\phi]`, and a non-polynomial :math:`\phi` stays
        an unevaluated :math:`\mathbb{E}[\phi]`.

        Raises
        ------
        ValueError
            If a factor mixes the answer with the others, or the answer's own
            factor is not a polynomial in its quantities.
        """
        own_atoms = [b[answer] for b in self.bases.values()]
        out = sp.Integer(0)
        for term in sp.Add.make_args(sp.expand(expr)):
            own, others = sp.Integer(1), sp.Integer(1)
            for f in sp.Mul.make_args(term):
                idx = {a.indices[0] for a in f.atoms(sp.Indexed) if a.base in self._plain_of}
                if not idx or idx == {answer}:
                    own *= f
                elif answer in idx:
                    raise ValueError(f"expr must separate answer {answer} from the others; the factor {sp.sstr(f)} mixes them")
                else:
                    others *= f
            if not own.is_polynomial(*own_atoms) and own.has(*own_atoms):
                raise ValueError(f"expr must be a polynomial in answer {answer}'s quantities, got the factor {sp.sstr(own)}")
            if others == 1:
                out += self.expect(own)
            elif others.is_polynomial(*sorted(others.atoms(sp.Indexed), key=str)):
                out += self.expect(own * others)
            else:
                out += self.expect(own) * Expect(others)
        return sp.expand(out)

    def _has_group_expectation(self, expr) -> bool:
        return any(self._is_random(e.args[0]) for e in expr.atoms(Expect))

    def _sum_inside(self, S: sp.Sum) -> sp.Expr:
        out = sp.Integer(0)
        for t in sp.Add.make_args(sp.expand(S.function)):
            inner = [f for f in sp.Mul.make_args(t) if isinstance(f, Expect) and self._is_random(f.args[0])]
            if not inner:  # a term free of the group's expectations stays a sum
                out += sp.Sum(t, *S.limits)
                continue
            if len(inner) != 1:
                raise ValueError(f"a sum of expectations must be linear in them, got {t}")
            coeff = t / inner[0]
            out += Expect(sp.Sum(coeff * inner[0].args[0], *S.limits))
        return out

    def _plain_linearity(self, e: Expect) -> sp.Expr:
        out = sp.Integer(0)
        randoms = set(self.plain.values())
        for t in sp.Add.make_args(sp.expand(e.args[0])):
            const, mono = t.as_independent(*randoms, as_Add=False)
            out += const * Expect(mono)
        return out

    # -- the independent check ------------------------------------------------------------
    def brute_force(self, expr: sp.Basic, G: int, outcomes: Sequence[Mapping[str, sp.Expr]], probs: Sequence[sp.Expr | float]) -> sp.Expr:
        r""":math:`\mathbb{E}[\text{expr}]` at a concrete ``G`` by enumerating all :math:`K^G` outcomes.

        Parameters
        ----------
        expr : sympy expression
            As for :meth:`expect`; its free answer indices are set to
            ``1, 2, ...`` in sorted order, and each :class:`OthersTotal`
            :math:`S_{-b}` is written out as :math:`\sum_j X_j - X_b`.
        G : int
            The group size, small (:math:`K^G` terms).
        outcomes : sequence of mappings
            ``K`` outcomes of one answer, each mapping a quantity name to its value.
        probs : sequence
            Their probabilities (summing to one).

        Examples
        --------
        >>> import sympy as sp
        >>> from derivations.iid_groups import IIDGroup
        >>> grp = IIDGroup()
        >>> out = [{"R": 1, "s": sp.Rational(1, 2)}, {"R": 0, "s": -sp.Rational(1, 2)}]
        >>> grp.brute_force((grp.R[grp.i] - grp.mean()) * grp.s[grp.i], 3, out, [sp.S.Half, sp.S.Half])
        1/6
        """
        require_int("G", G, minimum=1)
        probs = self._check_distribution(outcomes, probs)
        expr = sp.sympify(expr)
        free = self._free_indices(expr)
        if len(free) > G:
            raise ValueError(f"expr has {len(free)} distinct answers, more than G = {G}")
        expr = expr.replace(lambda e: isinstance(e, OthersTotal),
                            lambda e: self.total(e.quantity) - self._base(e.quantity)[e.args[0]])
        concrete = expr.xreplace({self.G: sp.Integer(G)} | {b: sp.Integer(k + 1) for k, b in enumerate(free)})
        concrete = concrete.doit()
        names = list(self.bases)
        terms = []
        for choice in itertools.product(range(len(outcomes)), repeat=G):
            values = {self.bases[n][k + 1]: sp.sympify(outcomes[c][n]) for k, c in enumerate(choice) for n in names}
            weight = sp.Mul(*[probs[c] for c in choice])
            terms.append(weight * concrete.xreplace(values))
        return sp.expand(sp.Add(*terms))  # one sum of all K^G terms (adding them one by one rebuilt it K^G times)

    def evaluate(self, result: sp.Basic, outcomes: Sequence[Mapping[str, sp.Expr]], probs: Sequence[sp.Expr | float], G: int | None = None) -> sp.Expr:
        """Substitute the moments of a distribution (and a concrete ``G``) into a result of :meth:`expect`."""
        probs = self._check_distribution(outcomes, probs)
        if G is not None:
            require_int("G", G, minimum=1)

        def moment(mono):
            return sp.Add(*[q * mono.xreplace({self.plain[n]: sp.sympify(o[n]) for n in self.bases}) for o, q in zip(outcomes, probs)])

        out = sp.sympify(result).replace(lambda e: isinstance(e, Expect), lambda e: moment(e.args[0]))
        if G is not None:
            out = out.xreplace({self.G: sp.Integer(G)})
        return sp.expand(out)


    def _check_distribution(self, outcomes, probs) -> list:
        """``probs`` as sympy numbers or expressions: non-negative where numeric, summing to one; outcomes name every quantity."""
        if isinstance(outcomes, (str, Mapping)) or not isinstance(outcomes, Sequence):
            raise TypeError(f"outcomes must be a sequence of mappings, got {type(outcomes).__name__}")
        if isinstance(probs, (str, Mapping)) or not hasattr(probs, "__len__"):
            raise TypeError(f"probs must be a sequence of probabilities, got {type(probs).__name__}")
        probs = list(probs)
        if len(outcomes) != len(probs) or not outcomes:
            raise ValueError("outcomes and probs must be non-empty and of equal length")
        for o in outcomes:
            if not isinstance(o, Mapping) or set(o) != set(self.bases):
                raise ValueError(f"outcomes must be mappings with exactly the keys {sorted(self.bases)}, got {o!r}")
        try:
            probs = [sp.sympify(q, strict=True) for q in probs]
        except sp.SympifyError:
            raise TypeError(f"probs must hold numbers or sympy expressions, got {list(probs)!r}") from None
        for q in probs:
            if q.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or q.is_real is False:
                raise ValueError(f"probs must be finite real numbers, got {q}")
            if q.is_negative:
                raise ValueError(f"probs must be non-negative, got {q}")
        gap = sp.simplify(sp.Add(*probs) - 1)
        if not (gap == 0 or gap.is_number and abs(float(gap)) <= 1e-12):
            raise ValueError(f"probs must sum to one, got {sp.Add(*probs)}")
        return probs


def _is_monomial(expr) -> bool:
    """A product of powers with coefficient 1 (``R*s``, ``R**2``): a moment's canonical argument."""
    expanded = sp.expand(expr)
    return expanded == expr and not expanded.is_Add and expanded.as_coeff_Mul()[0] == 1
