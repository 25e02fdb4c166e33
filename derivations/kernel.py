r"""The proof kernel: the only code that marks a step of a derivation verified.

**What a ✓ guarantees.** A ✓ on a step means that SymPy reduced the difference of the two displayed sides
to zero, or decided its sign, for every value that the stated assumptions and
premises allow (on every region of a partition the kernel built itself, for a
lemma instance whose assumptions the kernel checked), with the notation
replaced by its definitions as the page shows them and facts that are stated
premises or verified by the CAS; a step checked only at instances,
numerically, to a floating-point tolerance or from a table of values says so
in a box beside it.

What the kernel **trusts**: SymPy reducing a difference to zero
(:func:`~derivations.canonical.is_zero`), its evaluation of sums included (a
sum of a Kronecker delta :math:`\sum_k \mathbb{1}[S = k] f(k)` to a
``Piecewise`` on the range of :math:`S`); SymPy's sign decisions
(``is_positive`` and friends on factored forms) under the symbols' stated
assumptions (:mod:`derivations.regions`, :mod:`derivations.premises`);
``solveset`` for the solution set of a condition in one variable;
``sympy.minimum`` and ``sympy.limit``; the fixed rules by which it applies a
derivation's :class:`~derivations.definitions.Definitions` (substitution of
a symbol, a function or an indexed entry; differentiation with a
stop-gradient held constant; linearity of an expectation; the i.i.d. group
algebra of :mod:`derivations.iid_groups`, a rule whose data are the
quantities' names and :math:`G`, with its independence of answer :math:`i`
from a function of the other answers); and two rules of its own about random
quantities: a claim holds when it holds at each value of a quantity that a
stated premise :math:`x \in \{x_1, \dots\}` allows (:func:`~derivations.proofs.by_cases`), and
expectations of integrands equal for every outcome are equal
(:func:`~derivations.proofs.pointwise`).  No proof calls a function that the caller hands it.

What it does **not** trust: the caller.  A proof is one of the kernel's proof
objects (never a bare function); it states what it establishes (left side,
relation, right side, and a badge when it holds only at instances) and the
kernel compares that with the displayed claim, relation included (a strict
claim needs a strict proof).  Regions are built by the kernel from cut points
and must cover every admissible value of the variable; a lemma's instance must
satisfy the lemma's symbol assumptions and premises; premises must be
consistent (``False`` cannot be derived from them by SymPy); a fact substituted
into a step must be a premise shown on the page or be verified by the CAS.

What it **remembers**, within one process, so that a claim checked again (a
perturbed step beside its original, a doctest and its chapter) costs little:
the verdict of :func:`check` for a claim and a proof made of data alone (never
a lemma, whose derivation can change; a refusal is raised afresh with its
message), each sign decision (:mod:`derivations.regions`), each evaluated sum
(:func:`~derivations.canonical.evaluated`) and each parametrisation of the
premises.  Each is a pure function of immutable SymPy input; none changes a
verdict.  At a region's point each ``Min``/``Max`` is decided by the signs of
its arguments' differences there (:func:`~derivations.regions.at_point`)
rather than rebuilt by SymPy's constructor; an undecided or tied one is
rebuilt and decided as before.

**Where its parts live.** This module holds :func:`check` and the proof
kinds; what a step claims and when one relation between two expressions is
established (:class:`~derivations.claims.Claim`,
:func:`~derivations.claims.relation_holds`, :func:`~derivations.claims.implies`)
are :mod:`derivations.claims`; what the premises allow (bounds, a
parametrisation, consistency, and the partition a proof by regions is decided
on, :func:`~derivations.premises.covering_points`) is :mod:`derivations.premises`.

Examples
--------
>>> import sympy as sp
>>> from derivations import Derivation
>>> from derivations.proofs import on_regions
>>> x = sp.Symbol("x", real=True)
>>> d = Derivation("positive part").step(sp.Max(x, 0), x / 2 + sp.Abs(x) / 2, "cases", proof=on_regions((x, [0])))
>>> d.verify().proved_by()
{'regions': 1}
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, dataclass_transform

import sympy as sp

from .canonical import facts_key, is_zero
from .claims import Claim, Established, Verdict, implies, relation_holds
from .definitions import Definitions
from .iid_groups import Expect
from .notation import latex
from .premises import Refused, bounds, covering_points, is_relation, require_consistent
from .regions import at_least, at_point, resolve, truth

# Claim, Verdict, implies and relation_holds stay importable from the kernel, as before the split; they are documented
# (and listed in __all__) where they are defined, derivations.claims.
__all__ = ["Argmin", "Proof", "Refused", "check", "is_proof", "require_consistent"]


def _holds_under(rel, claim: Claim) -> bool:
    """``rel`` is a premise, or SymPy decides it true for every admissible value of the premises' symbols."""
    if rel in claim.conditions or rel is sp.true:
        return True
    return truth(sp.sympify(rel).subs(claim.parametrisation())) is True


class Proof:
    """A proof object of the kernel.  Only the kinds defined here (built by :mod:`derivations.proofs`) are accepted."""

    name = "proof"

    def establish(self, claim: Claim) -> Established | None:  # pragma: no cover - every kind overrides it
        raise NotImplementedError


_KINDS: set[type] = set()


_K = TypeVar("_K", bound=Proof)


@dataclass_transform(frozen_default=True)
def _kind(cls: type[_K]) -> type[_K]:
    _KINDS.add(cls)
    return dataclass(frozen=True)(cls)


def is_proof(obj: object) -> bool:
    """Whether ``obj`` is one of the kernel's proof objects (a bare function never is)."""
    return type(obj) in _KINDS


def _same(a, b) -> bool:
    if is_relation(a) or is_relation(b):
        return a == b
    return is_zero(sp.sympify(a) - sp.sympify(b) if not isinstance(a, sp.MatrixBase) else a - b) is not None


# ---------------------------------------------------------------- the check


def justify_facts(facts: Mapping[sp.Basic, sp.Basic], premises: Sequence[sp.Basic], unfold: Definitions | None) -> None:
    """Each fact ``k -> v`` is a premise ``Eq(k, v)`` shown on the page, or the CAS verifies ``k = v``; else refused."""
    for k, v in facts.items():
        k, v = sp.sympify(k), sp.sympify(v)
        if any(isinstance(p, sp.Eq) and {p.lhs, p.rhs} == {k, v} for p in premises):
            continue
        if is_zero(k - v, unfold=_applied(unfold)) is not None:
            continue
        raise Refused(f"the fact {sp.sstr(k)} = {sp.sstr(v)} is neither a stated premise nor verified by the CAS")


def _applied(definitions: Definitions | None) -> Callable | None:
    """The kernel's own application of the definitions, for the canonicalisers."""
    return None if definitions is None else definitions.apply


def check(claim: Claim, proof: Proof | None) -> Verdict:
    """Verify the displayed ``claim`` with ``proof`` (``None`` for an equality the canonicalisers decide); raise :class:`Refused` with the reason.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations.kernel import Claim, check
    >>> from derivations.proofs import holds
    >>> x = sp.Symbol("x", positive=True)
    >>> check(Claim(x + 1, ">", x), holds)
    Verdict(method='sign decided', badge=None)
    >>> check(Claim(x, ">", x), holds)
    Traceback (most recent call last):
    ...
    derivations.premises.Refused: the sign decided proof does not establish it
    """
    if not isinstance(claim, Claim):
        raise TypeError(f"claim must be a Claim (a step's displayed statement), got {type(claim).__name__}")
    if proof is not None and type(proof) not in _KINDS:
        raise TypeError(f"proof must be built by derivations.proofs (a bare function is not a proof), got {type(proof).__name__}")
    key = _memo_key(claim, proof)
    if key is None:
        return _check(claim, proof)
    if key not in _VERDICTS:
        try:
            _VERDICTS[key] = _check(claim, proof)
        except Refused as refused:
            _VERDICTS[key] = str(refused)
        if len(_VERDICTS) > _MEMO_SIZE:
            del _VERDICTS[next(iter(_VERDICTS))]
    verdict = _VERDICTS[key]
    if isinstance(verdict, str):
        raise Refused(verdict)
    return verdict


_VERDICTS: dict = {}
_MEMO_SIZE = 4096


def _memo_key(claim: Claim, proof: Proof | None) -> tuple | None:
    """What a verdict depends on, as a hashable key; ``None`` when the proof is not data alone (a lemma, a callable)."""
    if not _is_data(proof):
        return None
    facts = facts_key(claim.facts)
    if facts is None:  # facts the check itself will refuse: not remembered
        return None
    key = (claim.lhs, claim.relation, claim.rhs, claim.unfold, facts, claim.premises, claim.given, type(proof), proof)
    try:
        hash(key)
    except TypeError:  # an unhashable side or field: not remembered
        return None
    return key


def _is_data(proof: Proof | None) -> bool:
    """A proof whose verdict is a function of its fields and the claim (no derivation object, no callable)."""
    if proof is None:
        return True
    if type(proof) not in _DATA_KINDS:
        return False
    inner = getattr(proof, "inner", None)
    return inner is None or _is_data(inner)


def _check(claim: Claim, proof: Proof | None) -> Verdict:
    require_consistent(claim.conditions)
    if claim.facts:
        justify_facts(claim.facts, claim.conditions, claim.unfold)
    if proof is None:
        if claim.relation != "=":
            raise Refused(f"a step with relation {claim.relation!r} needs a proof")
        how = is_zero(claim.lhs - claim.rhs, claim.facts, _applied(claim.unfold))
        if how is None:
            raise Refused("the CAS does not reduce lhs - rhs to 0")
        return Verdict(how)
    est = proof.establish(claim)
    if est is None:
        raise Refused(f"the {proof.name} proof does not establish it")
    if not implies(est.relation, claim.relation):
        raise Refused(f"the {proof.name} proof establishes {est.relation!r}, which does not prove the displayed {claim.relation!r}")
    if not (_same(est.lhs, claim.lhs) and _same(est.rhs, claim.rhs)):
        raise Refused(f"the {proof.name} proof establishes {sp.sstr(est.lhs)} {est.relation} {sp.sstr(est.rhs)}, not the displayed claim")
    return Verdict(proof.name, est.badge)


# ---------------------------------------------------------------- the proof kinds


@_kind
class Decide(Proof):
    """The displayed relation decided directly, for every admissible value of the premises' symbols."""

    name = "sign decided"

    def establish(self, claim: Claim) -> Established | None:
        param = claim.parametrisation()
        left, right = (at_point(x, param) for x in (claim.left, claim.right))
        return Established(claim.lhs, claim.relation, claim.rhs) if relation_holds(left, claim.relation, right) else None


@_kind
class Regions(Proof):
    """The claim decided at every point of the kernel's partition of the cut variables' domains."""

    cuts: tuple
    label: str = "regions"
    inner: Proof | None = None

    @property
    def name(self) -> str:  # type: ignore[override]  # a kind whose name is its label shadows Proof.name
        return self.label

    def establish(self, claim: Claim) -> Established | None:
        points = covering_points(self.cuts, claim.premises, claim.given)
        partly: set[str] = set()  # an inner proof checked only partly (at instances) leaves its badge on the step
        for p in points:
            if any(truth(sp.sympify(q).subs(p)) is False for q in claim.conditions):
                continue  # the point lies outside the admissible set (a premise fails there)
            if self.inner is not None:
                here = claim.subs(p)
                if (badge := check(here, self.inner).badge) is not None:
                    partly.add(badge)
            elif not relation_holds(at_point(claim.left, p), claim.relation, at_point(claim.right, p)):
                return None
        return Established(claim.lhs, claim.relation, claim.rhs, "; ".join(sorted(partly)) or None)


_ASSUMPTIONS = ("positive", "negative", "nonnegative", "nonpositive", "nonzero", "zero", "real", "integer", "rational")
_SIGN_RELATIONS = {"positive": ">", "negative": "<", "nonnegative": ">=", "nonpositive": "<=", "nonzero": "!="}


def _satisfies(value, key: str, claim: Claim) -> bool:
    """``value`` has the assumption ``key`` (``positive``, ...), by its own assumptions or by the premises."""
    if getattr(value, f"is_{key}") is True:
        return True
    if key in _SIGN_RELATIONS:
        return _holds_under(sp.Rel(value, 0, _SIGN_RELATIONS[key]), claim)
    return False


@_kind
class Lemma(Proof):
    """A verified derivation's statement, instantiated by ``mapping`` (termwise under a ``Sum``)."""

    lemma: object
    mapping: tuple
    termwise: bool = False
    name = "lemma"

    def establish(self, claim: Claim) -> Established | None:
        from .derivation import Derivation

        if not isinstance(self.lemma, Derivation):
            raise Refused("a lemma must be a Derivation")
        self.lemma.verify()
        for i, st in enumerate(self.lemma.steps, 1):
            if st.badge:
                raise Refused(f"the lemma's step {i} was checked only partly ({st.badge}): it states nothing general")
        try:
            lhs, rel, rhs = self.lemma.statement()
        except ValueError as e:
            raise Refused(f"the lemma states nothing usable: {e}") from None
        mapping = dict(self.mapping)
        for s, value in mapping.items():
            for key in _ASSUMPTIONS:
                if getattr(s, f"is_{key}", None) is True and not _satisfies(sp.sympify(value), key, claim):
                    raise Refused(f"the lemma assumes {s} {key}, and its instance {sp.sstr(value)} is not provably {key}")
        for premise in self.lemma.premises:
            if not _holds_under(premise.subs(mapping), claim):
                raise Refused(f"the lemma's premise {sp.sstr(premise)} does not hold for the instance")
        lhs, rhs = sp.sympify(lhs).subs(mapping), sp.sympify(rhs).subs(mapping)
        if self.termwise:
            left, right = claim.lhs, claim.rhs
            if not (isinstance(left, sp.Sum) and isinstance(right, sp.Sum) and left.limits == right.limits):
                raise Refused("termwise: both displayed sides must be sums over the same range")
            lhs, rhs = sp.Sum(lhs, *left.limits), sp.Sum(rhs, *left.limits)
            rel = {"<": "<=", ">": ">="}.get(rel, rel)  # an empty sum is not strictly anything
        return Established(lhs, rel, rhs)


@_kind
class Minimum(Proof):
    """``lhs >= rhs`` (or ``<=``) because the minimum of the gap over ``domain``, which covers the variable's admissible values, is non-negative."""

    var: sp.Symbol
    domain: sp.Set
    name = "minimum"

    def establish(self, claim: Claim) -> Established | None:
        _require_domain(self.var, self.domain, claim.conditions)
        if claim.relation not in (">=", "<="):
            return None
        gap = claim.left - claim.right if claim.relation == ">=" else claim.right - claim.left
        if gap.free_symbols - {self.var} or not at_least(sp.minimum(gap, self.var, self.domain), False):
            return None
        return Established(claim.lhs, claim.relation, claim.rhs)


def _require_domain(var, domain: sp.Set, premises) -> None:
    """``domain`` must contain every admissible value of ``var`` (its assumptions and the premises bound it)."""
    lows, highs = bounds(var, premises)
    lo, lo_c = lows[0] if lows else (-sp.oo, False)
    hi, hi_c = highs[0] if highs else (sp.oo, False)
    admissible = sp.Interval(lo, hi, not lo_c, not hi_c)
    if admissible.is_subset(domain) is not True:
        raise Refused(f"the domain {domain} does not cover every admissible {var} ({admissible})")


@_kind
class Numerically(Proof):
    """A strict relation between two closed-form constants, evaluated to ``digits`` digits with a wide margin (badged)."""

    digits: int = 30

    @property
    def name(self) -> str:  # type: ignore[override]  # a kind whose name is its label shadows Proof.name
        return f"numeric ({self.digits} digits)"

    def establish(self, claim: Claim) -> Established | None:
        left, right = claim.left, claim.right
        if left.free_symbols or right.free_symbols:
            return None
        gap = (left - right).evalf(self.digits)
        scale = max(abs(left.evalf(self.digits)), abs(right.evalf(self.digits)), 1)
        if not gap.is_number or abs(gap) <= scale * sp.Float(10) ** (5 - self.digits):
            return None
        return Established(claim.lhs, ">" if gap > 0 else "<", claim.rhs, f"checked numerically to {self.digits} digits")


def _solution_set(cond, var, domain):
    if cond in (sp.true, sp.false):
        return domain if cond == sp.true else sp.S.EmptySet
    if isinstance(cond, sp.Contains) and cond.args[0] == var:
        return sp.Intersection(cond.args[1], domain)
    if isinstance(cond, (sp.And, sp.Or)):
        parts = [_solution_set(c, var, domain) for c in cond.args]
        return sp.Intersection(*parts) if isinstance(cond, sp.And) else sp.Union(*parts)
    if isinstance(cond, sp.Not):
        return sp.Complement(domain, _solution_set(cond.args[0], var, domain))
    return sp.solveset(cond, var, domain)


@_kind
class SameSolutions(Proof):
    """``lhs <=> rhs``: the two conditions on ``var`` have equal solution sets in ``domain`` (which covers ``var``'s admissible values)."""

    var: sp.Symbol
    domain: sp.Set
    name = "solution sets"

    def establish(self, claim: Claim) -> Established | None:
        _require_domain(self.var, self.domain, claim.conditions)
        param = claim.parametrisation(exclude=[self.var])
        left, right = (_solution_set(sp.sympify(c).subs(param), self.var, self.domain) for c in (claim.left, claim.right))
        if left == right or all(sp.Complement(u, v) == sp.S.EmptySet for u, v in ((left, right), (right, left))):
            return Established(claim.lhs, "<=>", claim.rhs)
        return None


class Argmin(sp.Function):
    r"""Unevaluated :math:`\operatorname{arg\,min}_v f`, displayed as such; ``Argmin(f, v)``."""

    nargs = 2

    def _latex(self, printer):
        f, v = self.args
        return rf"\operatorname*{{arg\,min}}_{{{printer._print(v)}}} \left({printer._print(f)}\right)"


@_kind
class IsArgmin(Proof):
    """``Argmin(f, v) = v*``: ``f'(v*) = 0`` and ``f''`` a positive constant in ``v``, so ``v*`` is the unique minimiser."""

    name = "unique stationary point, f'' > 0"

    def establish(self, claim: Claim) -> Established | None:
        if not isinstance(claim.lhs, Argmin):
            return None
        f, v = (claim.content(a) for a in claim.lhs.args)
        star = claim.right
        if star.has(v) or is_zero(sp.diff(f, v).subs(v, star)) is None:
            return None
        for key in _ASSUMPTIONS:
            if getattr(v, f"is_{key}", None) is True and not _satisfies(sp.sympify(star), key, claim):
                raise Refused(f"the minimiser {sp.sstr(star)} is not provably {key}, as {v} is")
        curvature = sp.diff(f, v, 2)
        if curvature.has(v) or not at_least(curvature, True):
            return None
        return Established(claim.lhs, "=", claim.rhs)


@_kind
class Instances(Proof):
    """The claim at ``symbol = value`` for each value, each proved by ``inner``: instances only (badged)."""

    symbol: sp.Symbol
    values: tuple
    inner: Proof = field(default_factory=Decide)

    @property
    def name(self) -> str:  # type: ignore[override]  # a kind whose name is its label shadows Proof.name
        return f"instances {self.symbol} = {', '.join(map(str, self.values))}"

    def establish(self, claim: Claim) -> Established | None:
        inner = {b for v in self.values if (b := check(claim.subs({self.symbol: v}), self.inner).badge) is not None}
        shown = ", ".join(latex(v) for v in self.values)
        badge = "; ".join([f"checked at ${latex(self.symbol)} = {shown}$ only", *sorted(inner)])
        return Established(claim.lhs, claim.relation, claim.rhs, badge)


@_kind
class LimitAlong(Proof):
    r"""``Limit(f, var, oo) = L``: on the tail ``var = base + t``, :math:`t > 0`, ``f`` resolves and tends to ``L`` as :math:`t \to \infty`."""

    var: sp.Symbol
    base: sp.Basic
    name = "limit along the tail"

    def establish(self, claim: Claim) -> Established | None:
        lim = claim.lhs
        if not isinstance(lim, sp.Limit) or lim.args[1:3] != (self.var, sp.oo) or self.base.has(self.var):
            return None
        t = sp.Dummy("t", positive=True)
        f = resolve(lim.args[0].subs(self.var, self.base + t))
        if f is None or not relation_holds(sp.limit(f, t, sp.oo), "=", claim.right):
            return None
        return Established(claim.lhs, "=", claim.rhs)


def _premised(expr: sp.Basic, claim: Claim) -> sp.Basic:
    """``expr`` with each relation that holds under the claim's premises (:func:`_holds_under`) read as true; relations in a bound variable are left alone."""
    bound = {v for e in sp.preorder_traversal(expr) if isinstance(e, (sp.Sum, sp.Product, sp.Integral, sp.Lambda)) for v in e.variables}
    return expr.replace(lambda e: isinstance(e, sp.core.relational.Relational) and not (e.free_symbols & bound) and _holds_under(e, claim),
                        lambda e: sp.true)


@_kind
class Cases(Proof):
    r"""The claim at each value of ``quantity``, which a stated premise :math:`x \in \{x_1, \dots\}` says are its only values.

    Each case is decided like :data:`~derivations.proofs.holds`, with every
    relation that holds under the premises read as true (so a ``Piecewise``
    branch that a premise selects is taken).  The values must be exactly the
    premise's set; ``quantity`` must not occur inside an expectation anywhere
    in the claim, its premises or its facts (there it is a random variable,
    not one value), nor involve a variable that a sum binds.
    """

    quantity: sp.Basic
    values: tuple

    @property
    def name(self) -> str:  # type: ignore[override]  # a kind whose name is its data shadows Proof.name
        return f"cases {sp.sstr(self.quantity)} in {{{', '.join(map(sp.sstr, self.values))}}}"

    def establish(self, claim: Claim) -> Established | None:
        allowed = sp.FiniteSet(*self.values)
        if not any(isinstance(c, sp.Contains) and c.args == (self.quantity, allowed) for c in claim.conditions):
            raise Refused(f"no premise says that {sp.sstr(self.quantity)} takes only the values {sp.sstr(allowed)}: "
                          "the cases must be exactly a stated premise's set")
        everything = (claim.lhs, claim.rhs, *claim.conditions, *(x for kv in (claim.facts or {}).items() for x in kv))
        if any(e.has(self.quantity) for x in everything for e in sp.sympify(x).atoms(Expect)):
            raise Refused(f"{sp.sstr(self.quantity)} occurs inside an expectation, where it is not one value (prove the integrands equal first)")
        if any(self.quantity.has(v) for x in (claim.lhs, claim.rhs) for e in sp.preorder_traversal(x)
               if isinstance(e, (sp.Sum, sp.Product, sp.Integral, sp.Lambda)) for v in e.variables):
            raise Refused(f"{sp.sstr(self.quantity)} involves a variable that a sum binds: it is not one quantity there")
        for v in self.values:
            here = claim.subs({self.quantity: v})
            param = here.parametrisation()
            left, right = (_premised(x, here).subs(param) if param else _premised(x, here) for x in (here.left, here.right))
            if not relation_holds(left, claim.relation, right):
                return None
        return Established(claim.lhs, claim.relation, claim.rhs)


@_kind
class Pointwise(Proof):
    r""":math:`\mathbb{E}[X] = \mathbb{E}[Y]` because :math:`X = Y` for every outcome the premises allow, proved by ``inner``."""

    inner: Proof

    @property
    def name(self) -> str:  # type: ignore[override]  # a kind whose name is its inner proof's shadows Proof.name
        return f"equal integrands ({self.inner.name})"

    def establish(self, claim: Claim) -> Established | None:
        if claim.relation != "=" or not (isinstance(claim.lhs, Expect) and isinstance(claim.rhs, Expect)):
            raise Refused("pointwise: both displayed sides must be expectations E[X] and E[Y], related by =")
        integrands = Claim(claim.lhs.args[0], "=", claim.rhs.args[0], claim.unfold, claim.facts, claim.premises, claim.given)
        return Established(claim.lhs, "=", claim.rhs, check(integrands, self.inner).badge)


def within(gap: sp.Basic, tol: float) -> bool:
    """A polynomial difference with floating-point coefficients, each of them at most ``tol`` in absolute value."""
    gap = sp.expand(gap)
    if not gap.has(sp.Float):
        return False
    symbols = sorted(gap.free_symbols, key=str)
    try:
        coefficients = sp.Poly(gap, *symbols).coeffs() if symbols else [gap]
    except sp.PolynomialError:  # sqrt(p), log(p): not a polynomial in its symbols, so no coefficients to compare
        return False
    return all(cf.is_number and abs(sp.N(cf)) <= tol for cf in coefficients)


@_kind
class Tolerance(Proof):
    """An equality whose sides differ only in floating-point coefficients, each at most ``tol`` (badged)."""

    tol: float

    @property
    def name(self) -> str:  # type: ignore[override]  # a kind whose name is its label shadows Proof.name
        return f"equal to {self.tol:g} per coefficient"

    def establish(self, claim: Claim) -> Established | None:
        if claim.relation != "=" or not within(claim.left - claim.right, self.tol):
            return None
        return Established(claim.lhs, "=", claim.rhs, f"floating-point coefficients equal to {self.tol:g}")


def count_patterns(m: int, n: int) -> list[tuple]:
    """Every way to put ``n`` answers on ``m`` values, as count tuples."""
    return [c for c in itertools.product(range(n + 1), repeat=m) if sum(c) == n]


@_kind
class Table(Proof):
    r"""``E[a s_1] = sum`` over the count patterns of ``G`` i.i.d. draws of a finite law, from the table of ``a`` (badged with the table).

    The kernel enumerates the patterns itself: the answer labelled 1's value :math:`v` and
    the others' counts :math:`c`; each has probability
    :math:`\binom{G-1}{c}\prod_k q_k^{c_k}`, and
    :math:`\mathbb{E}[\mathbb{1}[R_1 = v]\, s_1] = \nabla q_v`.  The table must give one
    value for each pattern.
    """

    advantage: sp.Symbol
    score: sp.Basic
    values: tuple
    q: tuple
    grads: tuple
    G: int
    table: tuple
    tol: float | None = None
    name = "summed over the value table"

    def establish(self, claim: Claim) -> Established | None:
        if claim.relation != "=" or claim.lhs != Expect(self.advantage * self.score):
            return None
        keys = [(v, c) for v, c, _ in self.table]
        needed = {(v, c) for v in self.values for c in count_patterns(len(self.values), self.G - 1)}
        if len(set(keys)) != len(keys) or set(keys) != needed:
            raise Refused(f"the table must give one value of {self.advantage} for each of the {len(needed)} count patterns")
        ways = sp.multinomial_coefficients(len(self.values), self.G - 1)
        total = sp.Add(*[ways[c] * sp.Mul(*[qk**ck for qk, ck in zip(self.q, c)])
                         * a * self.grads[self.values.index(v)] for v, c, a in self.table])
        left = claim.content(total)
        # either test establishes the sum; the float coefficients first, since with fp64 rounding in the gap every
        # canonicaliser, simplify last, would fail exactly before they were compared (without a float, within is False)
        gap = left - claim.right
        by_coefficients = self.tol is not None and gap.has(sp.Float) and within(gap, self.tol)
        if not (by_coefficients or relation_holds(left, "=", claim.right)):
            return None
        shown = ", ".join(rf"{latex(v)};{','.join(map(str, c))} \mapsto {latex(a)}" for v, c, a in self.table)
        return Established(claim.lhs, "=", claim.rhs, f"summed over the table of ${latex(self.advantage)}$ on (own reward; others' counts): ${shown}$")


_DATA_KINDS = {Decide, Regions, Minimum, Numerically, SameSolutions, IsArgmin, Instances, LimitAlong, Tolerance, Table}
"""The kinds whose verdict :func:`check` may remember: their fields are data (a :class:`Lemma` holds a mutable derivation)."""
