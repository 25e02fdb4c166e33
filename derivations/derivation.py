r"""The :class:`Derivation` record: ordered steps, each checked by the CAS.

A derivation is a chain of equalities

.. math::

    e_0 \overset{(1)}{=} e_1 \overset{(2)}{=} \cdots \overset{(n)}{=} e_n,

each step carrying its reason in words.  :meth:`Derivation.verify` proves every
step by showing that ``lhs - rhs`` canonicalises to zero, trying canonicalisers
from cheap to expensive and recording which one succeeded; it names the first
step that fails.  Nothing is pasted: both sides of every step are SymPy
expressions built by the code, and unevaluated operators (``Sum``,
``Derivative``) are evaluated only while checking, so the page shows the
notation and the CAS checks the content.

A step whose truth is not an equality (an inequality, a case split, an
equivalence) carries its own ``proof``: a function that receives the step's
displayed :class:`Claim` (``lhs``, relation, ``rhs``, with the derivation's
``unfold`` and the step's ``facts``) and returns ``True`` only when the CAS has
established exactly that claim.  :mod:`derivations.proofs` holds the proofs
the notes use (region by region, a verified lemma instantiated, a minimum, a
solution set).  Soundness is tested the sceptic's way: :meth:`Derivation.perturbed`
makes one displayed right-hand side false, and every check must then fail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import inspect
from dataclasses import dataclass, field

import sympy as sp

from ._validate import require_expr, require_optional, require_optional_callable

__all__ = ["Claim", "Derivation", "DerivationError", "Step", "is_zero", "reason_to_latex"]


class DerivationError(AssertionError):
    """A step of a derivation could not be verified."""


def _exp_to_symbols(expr: sp.Expr) -> sp.Expr:
    """Replace each ``exp(u)`` by a positive symbol (after splitting ``exp(a + b)``).

    Only sound outside sums: an ``exp`` of a bound index is not one number.
    """
    if expr.has(sp.Sum, sp.Product, sp.Integral):
        return expr
    expr = sp.expand_power_exp(expr)
    exps = sorted(expr.atoms(sp.exp), key=sp.default_sort_key)
    if not exps:
        return expr
    return expr.xreplace({e: sp.Dummy("x", positive=True) for e in exps})


def _cancel(expr: sp.Expr) -> sp.Expr:
    return sp.cancel(sp.together(expr))


_SUM_INDEX = sp.Symbol("k_sum", integer=True)


def _canonical_sum(s: sp.Sum) -> sp.Expr:
    """One dummy name, one term per Sum, factors free of the index pulled out."""
    (x, lo, hi), = s.limits
    out = 0
    for term in sp.Add.make_args(sp.expand(s.function.xreplace({x: _SUM_INDEX}))):
        free, bound = term.as_independent(_SUM_INDEX, as_Add=False)
        out += free * sp.Sum(bound, (_SUM_INDEX, lo, hi))
    return out


def _sums_to_symbols(expr: sp.Expr) -> sp.Expr:
    """Canonicalise every single-index ``Sum``, then treat each distinct sum as an atom."""
    if not expr.has(sp.Sum):
        return expr
    for _ in range(3):  # canonical form can expose sums that doit() now resolves (Kronecker deltas)
        new = expr.replace(lambda e: isinstance(e, sp.Sum) and len(e.limits) == 1, _canonical_sum).doit()
        if new == expr:
            break
        expr = new
    sums = sorted(expr.atoms(sp.Sum), key=sp.default_sort_key)
    return expr.xreplace({s: sp.Dummy("S") for s in sums})


CANONICALISERS: tuple[tuple[str, Callable[[sp.Expr], sp.Expr]], ...] = (
    ("expand", sp.expand),
    ("cancel(together)", _cancel),
    ("exp->x, cancel(together)", lambda e: _cancel(_exp_to_symbols(e))),
    ("expand_log, cancel", lambda e: _cancel(sp.expand_log(e))),
    ("sums as atoms, cancel(together)", lambda e: _cancel(_exp_to_symbols(_sums_to_symbols(e)))),
    ("simplify", sp.simplify),
)
"""Canonicalisers tried in order: the first that maps ``lhs - rhs`` to 0 proves the step."""


def _entries(expr) -> list[sp.Expr]:
    if isinstance(expr, sp.MatrixBase):
        return list(expr)
    return [sp.sympify(expr)]


def is_zero(expr, facts: Mapping | None = None, unfold: Callable | None = None) -> str | None:
    """Name of the canonicaliser that reduces ``expr`` (scalar or matrix) to 0, else ``None``.

    ``unfold`` rewrites display notation into definitions (``pi[a]`` into
    ``exp(theta[a]) / Z``, say) before unevaluated operators are evaluated;
    ``facts`` is a substitution applied after that, e.g.
    ``{Sum(p[a], (a, 1, K)): 1}``.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import is_zero
    >>> x = sp.Symbol("x")
    >>> is_zero((x + 1) ** 2 - x**2 - 2 * x - 1)
    'expand'
    >>> is_zero(sp.exp(x) / (1 + sp.exp(x)) - 1 / (1 + sp.exp(-x)))
    'cancel(together)'
    >>> is_zero(x) is None
    True
    """
    require_expr("expr", expr)
    require_optional("facts", facts, Mapping, "a mapping")
    require_optional_callable("unfold", unfold)
    used = []
    for entry in _entries(expr):
        if unfold is not None:
            entry = unfold(entry)
        _reject_vacuous_derivatives(entry)
        entry = entry.doit()
        if facts:
            # split logs while the symbols still carry their signs (a fact like pi_K = 1 - ... hides them);
            # without force, expand_log splits only what the assumptions allow
            entry = sp.expand_log(entry).subs(facts).doit()
        for name, canon in CANONICALISERS:
            try:
                reduced = canon(entry)
            except Exception:  # a canonicaliser that breaks proves nothing; try the next
                continue
            if reduced == 0:
                used.append(name)
                break
        else:
            return None
    # the most expensive canonicaliser any entry needed
    order = [name for name, _ in CANONICALISERS]
    return max(used, key=order.index) if used else "expand"


def reason_to_latex(reason: str) -> str:
    r"""A reason in words, with ``$...$`` inline math, as LaTeX text mode.

    Examples
    --------
    >>> from derivations import reason_to_latex
    >>> reason_to_latex("linearity of $\\mathbb{E}$")
    '\\text{linearity of }\\mathbb{E}'
    """
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a str, got {type(reason).__name__}")
    parts = reason.split("$")
    if len(parts) % 2 == 0:
        raise ValueError(f"reason has an unmatched '$': {reason!r}")
    out = []
    for i, part in enumerate(parts):
        if not part:
            continue
        out.append(part if i % 2 else r"\text{" + part.replace("{", r"\{").replace("}", r"\}") + "}")
    return "".join(out)


@dataclass(frozen=True)
class Claim:
    r"""The displayed statement ``lhs <relation> rhs`` of a step, with what checking it may use.

    A step's ``proof`` receives this object and nothing else, so it can only
    establish the relation between the expressions that the page shows.
    :attr:`left` and :attr:`right` are those expressions with the notation
    unfolded into definitions, unevaluated operators evaluated and the stated
    facts substituted: the content the CAS checks.
    """

    lhs: sp.Basic
    relation: str
    rhs: sp.Basic
    unfold: Callable | None = None
    facts: Mapping | None = None
    premises: tuple = ()

    def __post_init__(self):
        require_expr("lhs", self.lhs)
        _require_relation(self.relation)
        require_expr("rhs", self.rhs)
        require_optional_callable("unfold", self.unfold)
        require_optional("facts", self.facts, Mapping, "a mapping")
        if not isinstance(self.premises, tuple):
            raise TypeError(f"premises must be a tuple of SymPy relations, got {type(self.premises).__name__}")

    def content(self, expr) -> sp.Basic:
        """``expr`` as the CAS checks it: unfolded, evaluated, facts substituted."""
        if self.unfold is not None:
            expr = self.unfold(expr)
        _reject_vacuous_derivatives(expr)
        expr = expr.doit()
        if self.facts:
            expr = expr.subs(self.facts).doit()
        return expr

    @property
    def left(self) -> sp.Basic:
        return self.content(self.lhs)

    @property
    def right(self) -> sp.Basic:
        return self.content(self.rhs)

    def subs(self, mapping) -> Claim:
        """The claim with ``mapping`` substituted into both displayed sides."""
        return Claim(sp.sympify(self.lhs).subs(mapping), self.relation, sp.sympify(self.rhs).subs(mapping),
                     self.unfold, self.facts, tuple(p.subs(mapping) for p in self.premises))


def _reject_vacuous_derivatives(expr) -> None:
    """Refuse a displayed derivative of an undefined function with respect to a variable not among its arguments.

    SymPy evaluates ``Derivative(pi(theta), theta_j)`` to 0 when ``theta_j`` is
    not an argument of ``pi``, while a reader sees a derivative of the policy:
    such a step would be checked against something other than what it shows.
    (A derivative of a plain symbol or table entry, ``log P[s, a]``, is a
    statement that it is free of the variable, and stays allowed.)
    """
    if not isinstance(expr, sp.Basic):
        return
    for d in expr.atoms(sp.Derivative):
        if not d.expr.atoms(sp.core.function.AppliedUndef):
            continue
        for v, _ in d.variable_count:
            if not d.expr.has(v.base if isinstance(v, sp.Indexed) else v):
                raise DerivationError(
                    f"the displayed derivative {sp.sstr(d)} is of an undefined function free of {v}: "
                    "SymPy would check it as 0; unfold the notation into definitions first"
                )


@dataclass
class Step:
    """One step ``lhs <relation> rhs`` with its reason.

    An equality is checked by the canonicalisers (:func:`is_zero`) after the
    derivation's ``unfold`` and the step's ``facts``.  Any other relation, or an
    equality they cannot reach, carries a ``proof``: a function of the
    displayed :class:`Claim` that returns ``True`` only when the CAS has
    established that claim (see :mod:`derivations.proofs` for the ones the
    notes use).
    """

    lhs: sp.Basic
    rhs: sp.Basic
    reason: str
    relation: str = "="
    proof: Callable[[Claim], bool] | None = None
    facts: Mapping | None = None
    proved_by: str | None = field(default=None, compare=False)

    def __post_init__(self):
        require_expr("lhs", self.lhs)
        require_expr("rhs", self.rhs)
        if not isinstance(self.reason, str) or not self.reason:
            raise TypeError(f"reason must be a non-empty str, got {self.reason!r}")
        reason_to_latex(self.reason)  # an unmatched '$' fails here, not when the page is rendered
        _require_relation(self.relation)
        require_optional_callable("proof", self.proof)
        require_optional("facts", self.facts, Mapping, "a mapping")
        require_optional("proved_by", self.proved_by, str, "a str")

    def claim(self, unfold: Callable | None = None, premises: tuple = ()) -> Claim:
        """The displayed statement of this step, under the derivation's ``premises``."""
        return Claim(self.lhs, self.relation, self.rhs, unfold, self.facts, tuple(premises))

    def verify(self, unfold: Callable | None = None, premises: tuple = ()) -> str | None:
        if self.proof is not None:
            ok = self.proof(self.claim(unfold, premises))
            if not isinstance(ok, bool | sp.logic.boolalg.BooleanAtom):
                raise TypeError(f"a step's proof must return a bool, got {type(ok).__name__}")
            self.proved_by = getattr(self.proof, "name", "proof") if bool(ok) else None
        elif self.relation == "=":
            self.proved_by = is_zero(self.lhs - self.rhs, self.facts, unfold)
        else:
            raise DerivationError(f"a step with relation {self.relation!r} needs a proof")
        return self.proved_by

    def perturbed(self, delta: sp.Symbol) -> Step:
        """This step with its displayed right-hand side made false by a fresh positive ``delta``.

        ``=``, ``>=`` and ``>`` get ``rhs + delta``; ``<=`` and ``<`` get
        ``rhs - delta``; a logical relation gets ``Not(rhs)``.  A sound check
        rejects every perturbed step.
        """
        if self.relation in ("<=>", "=>"):
            rhs = sp.Not(self.rhs)
        elif isinstance(self.rhs, sp.MatrixBase):
            rhs = self.rhs + delta * sp.ones(*self.rhs.shape)
        else:
            rhs = self.rhs - delta if self.relation in ("<=", "<") else self.rhs + delta
        return Step(self.lhs, _sympify(rhs), self.reason, self.relation, self.proof, self.facts)


_RELATIONS = {"=": "=", "<=": r"\le", ">=": r"\ge", "<": "<", ">": ">", "=>": r"\Rightarrow", "<=>": r"\iff"}


def _require_relation(relation) -> str:
    if not isinstance(relation, str) or relation not in _RELATIONS:
        raise ValueError(f"relation must be one of {sorted(_RELATIONS)}, got {relation!r}")
    return relation


class Derivation:
    r"""An ordered chain of CAS-checked steps.

    Parameters
    ----------
    title : str
        What is derived, in words.
    start : sympy expression, optional
        The first left-hand side; :meth:`then` continues from the last right-hand side.
    assumptions : sequence of str or SymPy relations
        Standing assumptions, shown with the derivation.  A relation (``c >= 1``)
        is also a *premise*: a proof may rely on it (:func:`derivations.proofs.by_lemma`
        accepts a lemma's premise when the instance satisfies it or the
        derivation states it).
    unfold : callable, optional
        Rewrites the notation of the steps into definitions before checking
        (for instance ``pi[a]`` into ``exp(theta[a]) / Z``), so that the page
        shows :math:`\pi_a` and the CAS checks the softmax.

    Examples
    --------
    >>> import sympy as sp
    >>> from derivations import Derivation
    >>> x = sp.Symbol("x")
    >>> d = Derivation("square of a sum", start=(x + 1) ** 2)
    >>> d = d.then(x**2 + 2 * x + 1, "binomial formula")
    >>> d.verify().verified
    True
    >>> print(d.to_latex())
    \begin{aligned}
    \left(x + 1\right)^{2} &= x^{2} + 2 x + 1 && \color{gray}{\text{binomial formula}}
    \end{aligned}
    >>> Derivation("wrong", start=x).then(x + 1, "a slip").verify()
    Traceback (most recent call last):
    ...
    derivations.derivation.DerivationError: wrong: step 1 (a slip) does not hold: x = x + 1
    """

    def __init__(self, title: str, start=None, assumptions: Sequence[str] = (), unfold: Callable | None = None):
        if not isinstance(title, str) or not title:
            raise TypeError(f"title must be a non-empty str, got {title!r}")
        if unfold is not None and not callable(unfold):
            raise TypeError(f"unfold must be callable, got {type(unfold).__name__}")
        self.title = title
        if isinstance(assumptions, (str, sp.Basic)) or not isinstance(assumptions, Sequence):
            raise TypeError(f"assumptions must be a sequence of str or SymPy relations, got {type(assumptions).__name__}")
        for a in assumptions:
            if not isinstance(a, str) and not (isinstance(a, sp.logic.boolalg.Boolean) and not isinstance(a, sp.Expr)):
                raise TypeError(f"assumptions must be str or SymPy relations, got {a!r}")
        self._stated = tuple(assumptions)
        self.unfold = unfold
        self.steps: list[Step] = []
        if start is not None and not isinstance(start, (list, tuple)):
            require_expr("start", start)
        self._cursor = None if start is None else _sympify(start)
        self.verified = False

    def step(self, lhs, rhs, reason: str, *, relation: str = "=", proof=None, facts=None) -> Derivation:
        """Add a step ``lhs <relation> rhs``; later :meth:`then` steps continue from ``rhs``."""
        _require_relation(relation)
        if not isinstance(reason, str) or not reason:
            raise TypeError(f"reason must be a non-empty str, got {reason!r}")
        reason_to_latex(reason)  # fail early on unmatched '$'
        if proof is not None:
            _require_claim_proof(proof)
        self.steps.append(Step(_sympify(lhs), _sympify(rhs), reason, relation, proof, facts))
        self._cursor = self.steps[-1].rhs
        self.verified = False
        return self

    def then(self, rhs, reason: str, **kwargs) -> Derivation:
        """Continue the chain: ``<last rhs> = rhs`` because ``reason``."""
        if self._cursor is None:
            raise ValueError("then() needs a start expression or an earlier step")
        return self.step(self._cursor, rhs, reason, **kwargs)

    @property
    def lhs(self):
        """The first left-hand side."""
        return self.steps[0].lhs

    @property
    def rhs(self):
        """The last right-hand side: the result."""
        return self.steps[-1].rhs

    def subs(self, mapping, title: str | None = None) -> Derivation:
        """The same chain with ``mapping`` substituted into every step (an instance of it)."""
        unfold = self.unfold
        out = Derivation(
            title or self.title,
            assumptions=[a if isinstance(a, str) else a.subs(mapping) for a in self._stated],
            unfold=None if unfold is None else (lambda e: unfold(e).subs(mapping)),
        )
        for st in self.steps:
            facts = None if st.facts is None else {k.subs(mapping): v.subs(mapping) for k, v in st.facts.items()}
            out.steps.append(Step(st.lhs.subs(mapping), st.rhs.subs(mapping), st.reason, st.relation, st.proof, facts))
        out._cursor = self._cursor
        return out

    @property
    def assumptions(self) -> tuple[str, ...]:
        """The standing assumptions as shown (relations as inline math)."""
        return tuple(a if isinstance(a, str) else f"${sp.latex(a)}$" for a in self._stated)

    @property
    def premises(self) -> tuple:
        """The assumptions that are SymPy relations: what a proof may rely on."""
        return tuple(a for a in self._stated if not isinstance(a, str))

    def statement(self) -> tuple[sp.Basic, str, sp.Basic]:
        """What the chain proves: ``(first lhs, relation, last rhs)``.

        Each step must start where the previous one ended; the relation is
        ``=`` for a chain of equalities, else the one inequality direction
        every step shares (strict if any step is strict).
        """
        if not self.steps:
            raise ValueError(f"{self.title}: an empty derivation states nothing")
        for prev, st in zip(self.steps, self.steps[1:]):
            if st.lhs != prev.rhs:
                raise ValueError(f"{self.title}: not a chain (a step starts at {sp.sstr(st.lhs)}, not at {sp.sstr(prev.rhs)})")
        relations = {st.relation for st in self.steps} - {"="}
        if not relations:
            return self.lhs, "=", self.rhs
        directions = {rel.rstrip("=") for rel in relations}
        if len(directions) != 1 or directions - {"<", ">"}:
            raise ValueError(f"{self.title}: steps with relations {sorted(relations)} do not chain")
        (direction,) = directions
        strict = direction in relations
        return self.lhs, direction if strict else direction + "=", self.rhs

    def replaced(self, index: int, rhs=None, lhs=None) -> Derivation:
        """A copy whose step ``index`` (from 0) displays another ``rhs`` (or ``lhs``), with the same reason and proof.

        Assumptions, premises and ``unfold`` are kept, so a sceptic's test that
        the slip fails is not passed for another reason.
        """
        out = Derivation(self.title, assumptions=self._stated, unfold=self.unfold)
        for i, st in enumerate(self.steps):
            new_lhs = st.lhs if i != index or lhs is None else _sympify(lhs)
            new_rhs = st.rhs if i != index or rhs is None else _sympify(rhs)
            out.steps.append(Step(new_lhs, new_rhs, st.reason, st.relation, st.proof, st.facts))
        if not 0 <= index < len(self.steps):
            raise IndexError(f"index must name a step (0..{len(self.steps) - 1}), got {index}")
        return out

    def perturbed(self, index: int, delta: sp.Symbol | None = None) -> Derivation:
        """A copy whose step ``index`` (from 0) displays a false right-hand side (:meth:`Step.perturbed`)."""
        delta = sp.Symbol("delta_perturbation", positive=True) if delta is None else delta
        return self.replaced(index, rhs=self.steps[index].perturbed(delta).rhs)

    def verify(self) -> Derivation:
        """Check every step with the CAS; raise :class:`DerivationError` at the first that fails."""
        for i, st in enumerate(self.steps, 1):
            if st.verify(self.unfold, self.premises) is None:
                raise DerivationError(
                    f"{self.title}: step {i} ({st.reason}) does not hold: "
                    f"{sp.sstr(st.lhs)} {st.relation} {sp.sstr(st.rhs)}"
                )
        self.verified = bool(self.steps)
        return self

    def proved_by(self) -> dict[str, int]:
        """How many steps each canonicaliser (or a step's own proof) established."""
        counts: dict[str, int] = {}
        for st in self.steps:
            if st.proved_by:
                counts[st.proved_by] = counts.get(st.proved_by, 0) + 1
        return counts

    def to_latex(self) -> str:
        """The chain as an ``aligned`` block, one step a line, reasons on the right."""
        lines, previous = [], None
        for st in self.steps:
            left = "" if previous is not None and st.lhs == previous else sp.latex(st.lhs)
            rel = _RELATIONS[st.relation]
            reason = r"\color{gray}{" + reason_to_latex(st.reason) + "}"
            lines.append(f"{left} &{rel} {sp.latex(st.rhs)} && {reason}")
            previous = st.rhs
        return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"

    def _repr_latex_(self) -> str:
        return "$$" + self.to_latex() + "$$"

    def __repr__(self) -> str:
        state = "verified" if self.verified else "unverified"
        return f"<Derivation {self.title!r}: {len(self.steps)} steps, {state}>"


def _require_claim_proof(proof) -> None:
    """A proof must take the displayed claim: a function of nothing cannot see what it proves."""
    if not callable(proof):
        raise TypeError(f"proof must be a function of the displayed Claim, got {type(proof).__name__}")
    try:
        inspect.signature(proof).bind(None)
    except TypeError:
        raise TypeError("proof must take the displayed Claim as its one argument (a proof of nothing cannot see the step)") from None
    except ValueError:  # builtins without a signature
        pass


def _sympify(x):
    if isinstance(x, sp.MatrixBase):
        return sp.ImmutableMatrix(x)
    if isinstance(x, (list, tuple)):
        return sp.ImmutableMatrix(x)
    return sp.sympify(x)
