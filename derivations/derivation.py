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
equivalence) carries its own ``proof``, built by :mod:`derivations.proofs`
(region by region, a verified lemma instantiated, a minimum, a solution set);
the kernel (:mod:`derivations.kernel`) hands it the step's displayed
:class:`Claim` and compares what it establishes with the display.  The
notation's meaning is the derivation's ``unfold``, a
:class:`~derivations.definitions.Definitions` value that the kernel applies and
the page shows after the steps.
Soundness is tested the sceptic's way: :meth:`Derivation.perturbed`
makes one displayed right-hand side false, and every check must then fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import sympy as sp

from . import kernel
from ._validate import require_expr, require_optional
from .canonical import CANONICALISERS, DerivationError, is_zero
from .claims import Claim
from .definitions import Definitions
from .notation import latex, latex_terms

__all__ = ["CANONICALISERS", "Claim", "Derivation", "Step", "is_zero", "reason_to_latex"]


Side: TypeAlias = sp.Basic | sp.MatrixBase | float | list | tuple
"""One side of a displayed step: a SymPy expression or matrix, a number, or a nested list (read as a matrix)."""


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


@dataclass
class Step:
    """One step ``lhs <relation> rhs`` with its reason, verified only by the kernel (:mod:`derivations.kernel`).

    An equality is checked by the canonicalisers (:func:`is_zero`) after the
    derivation's ``unfold`` and the step's ``facts`` (each a premise shown on
    the page or verified by the CAS).  Any other relation, or an equality they
    cannot reach, carries a ``proof`` built by :mod:`derivations.proofs`.
    ``given`` are conditions under which this step alone is claimed (a case,
    a region); the page shows them with the step.  After :meth:`verify`,
    ``proved_by`` names the method and ``badge`` says when the step was
    checked only partially (at instances, numerically).
    """

    lhs: sp.Basic
    rhs: sp.Basic
    reason: str
    relation: str = "="
    proof: kernel.Proof | None = None
    facts: Mapping | None = None
    given: tuple = ()
    proved_by: str | None = field(default=None, compare=False)
    badge: str | None = field(default=None, compare=False)
    refusal: str | None = field(default=None, compare=False)

    def __post_init__(self):
        require_expr("lhs", self.lhs)
        require_expr("rhs", self.rhs)
        if not isinstance(self.reason, str) or not self.reason:
            raise TypeError(f"reason must be a non-empty str, got {self.reason!r}")
        reason_to_latex(self.reason)  # an unmatched '$' fails here, not when the page is rendered
        _require_relation(self.relation)
        if self.proof is not None and not kernel.is_proof(self.proof):
            raise TypeError(f"step ({self.reason}): proof must be built by derivations.proofs (a bare function is not a proof), "
                            f"got {type(self.proof).__name__}")
        require_optional("facts", self.facts, Mapping, "a mapping")
        self.given = _require_conditions("given", self.given)
        require_optional("proved_by", self.proved_by, str, "a str")

    def claim(self, unfold: Definitions | None = None, premises: tuple = ()) -> Claim:
        """The displayed statement of this step, under the derivation's ``premises`` and the step's ``given``."""
        given_facts = {c.lhs: c.rhs for c in self.given if isinstance(c, sp.Eq)}
        facts = {**(self.facts or {}), **given_facts} or None
        return Claim(self.lhs, self.relation, self.rhs, unfold, facts, tuple(premises), self.given)

    def verify(self, unfold: Definitions | None = None, premises: tuple = ()) -> str | None:
        """The kernel's verdict: the method's name, or ``None`` (and :attr:`refusal` says why)."""
        try:
            verdict = kernel.check(self.claim(unfold, premises), self.proof)
        except kernel.Refused as refused:
            self.proved_by, self.badge, self.refusal = None, None, str(refused)
            return None
        self.proved_by, self.badge, self.refusal = verdict.method, verdict.badge, None
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
        return Step(self.lhs, _sympify(rhs), self.reason, self.relation, self.proof, self.facts, self.given)

    def badge_latex(self) -> str:
        """What the page shows beside the reason: the ``given`` conditions and the partial-check badge."""
        out = ""
        if self.given:
            out += r"\quad\boxed{\text{given } " + r",\ ".join(latex(c) for c in self.given) + "}"
        if self.badge:
            out += r"\quad\boxed{" + reason_to_latex(self.badge) + "}"
        return out

    def reason_pieces(self) -> list[str]:
        """The reason and its badges as LaTeX pieces a narrow page may put on separate lines.

        The reason is cut at its ``"; "`` (outside math), each piece grey; a
        badge is one box, and a badge that lists a table (``...: $e_1, e_2, ...$``)
        is its head in a box followed by the entries, one piece each.
        """
        pieces = [r"\color{gray}{" + reason_to_latex(part) + "}" for part in _split_outside_math(self.reason, "; ")]
        if self.given:
            pieces.append(r"\boxed{\text{given } " + r",\ ".join(latex(c) for c in self.given) + "}")
        if self.badge:
            head, sep, table = self.badge.rpartition(": $")
            if sep and table.endswith("$") and "$" not in table[:-1] and len(self.badge) > 80:
                pieces.append(r"\boxed{" + reason_to_latex(head + ":") + "}")
                entries = _split_outside_math(table[:-1], ", ")
                pieces += [e + ("," if k < len(entries) - 1 else "") for k, e in enumerate(entries)]
            else:
                pieces.append(r"\boxed{" + reason_to_latex(self.badge) + "}")
        return pieces


def _split_outside_math(text: str, sep: str) -> list[str]:
    """``text`` cut at ``sep`` where it is outside ``$...$`` and outside brackets."""
    parts, depth, math, start, k = [], 0, False, 0, 0
    while k < len(text):
        c = text[k]
        if c == "$":
            math = not math
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif not math and depth == 0 and text.startswith(sep, k):
            parts.append(text[start:k])
            start = k + len(sep)
            k = start
            continue
        k += 1
    parts.append(text[start:])
    return [p for p in parts if p]


def _require_conditions(name: str, value) -> tuple:
    if isinstance(value, sp.Basic) or not isinstance(value, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of SymPy relations, got {type(value).__name__}")
    for c in value:
        if not isinstance(c, sp.logic.boolalg.Boolean) or isinstance(c, sp.Expr):
            raise TypeError(f"{name} must hold SymPy relations, got {c!r}")
        if c is sp.false:
            raise ValueError(f"{name}: False is not a condition (it would make the step vacuous)")
    return tuple(value)


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
    unfold : Definitions, optional
        The notation's definitions (for instance :math:`\pi_a := e^{\theta_a}/Z`),
        data that the kernel applies before checking, so that the page shows
        :math:`\pi_a` and the CAS checks the softmax; the page shows them
        after the steps ("where ...").  A function is refused.

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
    derivations.canonical.DerivationError: wrong: step 1 (a slip) does not hold: x = x + 1 (the CAS does not reduce lhs - rhs to 0)
    """

    def __init__(self, title: str, start: Side | None = None, assumptions: Sequence[str | sp.Basic] = (), unfold: Definitions | None = None) -> None:
        if not isinstance(title, str) or not title:
            raise TypeError(f"title must be a non-empty str, got {title!r}")
        if unfold is not None and not isinstance(unfold, Definitions):
            raise TypeError(f"unfold must be a Definitions (the notation's definitions, as data the kernel applies; "
                            f"a function is not accepted), got {type(unfold).__name__}")
        self.title = title
        if isinstance(assumptions, (str, sp.Basic)) or not isinstance(assumptions, Sequence):
            raise TypeError(f"assumptions must be a sequence of str or SymPy relations, got {type(assumptions).__name__}")
        for a in assumptions:
            if not isinstance(a, str) and not (isinstance(a, sp.logic.boolalg.Boolean) and not isinstance(a, sp.Expr)):
                raise TypeError(f"assumptions must be str or SymPy relations, got {a!r}")
            if a is sp.false:
                raise ValueError("assumptions: False is not an assumption (everything would follow from it)")
        self._stated = tuple(assumptions)
        self.unfold = unfold
        self.steps: list[Step] = []
        if start is not None and not isinstance(start, (list, tuple)):
            require_expr("start", start)
        self._cursor = None if start is None else _sympify(start)
        self.verified = False

    def step(self, lhs: Side, rhs: Side, reason: str, *, relation: str = "=", proof: kernel.Proof | None = None,
             facts: Mapping[sp.Basic, sp.Basic] | None = None, given: tuple[sp.Basic, ...] | list[sp.Basic] = ()) -> Derivation:
        """Add a step ``lhs <relation> rhs``; later :meth:`then` steps continue from ``rhs``."""
        self.steps.append(Step(_sympify(lhs), _sympify(rhs), reason, relation, proof, facts, tuple(given) if isinstance(given, list) else given))
        self._cursor = self.steps[-1].rhs
        self.verified = False
        return self

    def then(self, rhs: Side, reason: str, **kwargs: Any) -> Derivation:
        """Continue the chain: ``<last rhs> = rhs`` because ``reason``."""
        if self._cursor is None:
            raise ValueError("then() needs a start expression or an earlier step")
        return self.step(self._cursor, rhs, reason, **kwargs)

    @property
    def lhs(self) -> sp.Basic:
        """The first left-hand side."""
        return self.steps[0].lhs

    @property
    def rhs(self) -> sp.Basic:
        """The last right-hand side: the result."""
        return self.steps[-1].rhs

    def subs(self, mapping: Mapping[sp.Basic, sp.Basic], title: str | None = None) -> Derivation:
        """The same chain with ``mapping`` substituted into every step (an instance of it)."""
        out = Derivation(
            title or self.title,
            assumptions=[a if isinstance(a, str) else a.subs(mapping) for a in self._stated],
            unfold=None if self.unfold is None else self.unfold.subs(mapping),
        )
        for st in self.steps:
            facts = None if st.facts is None else {k.subs(mapping): v.subs(mapping) for k, v in st.facts.items()}
            given = tuple(c.subs(mapping) for c in st.given)
            out.steps.append(Step(st.lhs.subs(mapping), st.rhs.subs(mapping), st.reason, st.relation, st.proof, facts, given))
        out._cursor = None if self._cursor is None else self._cursor.subs(mapping)
        return out

    @property
    def assumptions(self) -> tuple[str, ...]:
        """The standing assumptions as shown (relations as inline math)."""
        return tuple(a if isinstance(a, str) else f"${latex(a)}$" for a in self._stated)

    @property
    def premises(self) -> tuple:
        """The assumptions that are SymPy relations: what a proof may rely on."""
        return tuple(a for a in self._stated if not isinstance(a, str))

    def statement(self) -> tuple[sp.Basic, str, sp.Basic]:
        """What the chain proves: ``(first lhs, relation, last rhs)``.

        Each step must start where the previous one ended; the relation is
        ``=`` for a chain of equalities, else the one inequality direction
        every step shares, and the weakest relation in the chain: strict only
        if every inequality step is strict (``>`` then ``>=`` states ``>=``).
        """
        if not self.steps:
            raise ValueError(f"{self.title}: an empty derivation states nothing")
        for i, st in enumerate(self.steps, 1):
            if st.given:
                raise ValueError(f"{self.title}: step {i} holds only given {', '.join(map(sp.sstr, st.given))}, so the chain states nothing unconditional")
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
        strict = relations == {direction}
        return self.lhs, direction if strict else direction + "=", self.rhs

    def replaced(self, index: int, rhs: Side | None = None, lhs: Side | None = None) -> Derivation:
        """A copy whose step ``index`` (from 0) displays another ``rhs`` (or ``lhs``), with the same reason and proof.

        Assumptions, premises and ``unfold`` are kept, so a sceptic's test that
        the slip fails is not passed for another reason.
        """
        if not 0 <= index < len(self.steps):
            raise IndexError(f"index must name a step (0..{len(self.steps) - 1}), got {index}")
        out = Derivation(self.title, assumptions=self._stated, unfold=self.unfold)
        for i, st in enumerate(self.steps):
            new_lhs = st.lhs if i != index or lhs is None else _sympify(lhs)
            new_rhs = st.rhs if i != index or rhs is None else _sympify(rhs)
            out.steps.append(Step(new_lhs, new_rhs, st.reason, st.relation, st.proof, st.facts, st.given))
        out._cursor = out.steps[-1].rhs if out.steps else self._cursor
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
                    f"{sp.sstr(st.lhs)} {st.relation} {sp.sstr(st.rhs)} ({st.refusal})"
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
            left = "" if previous is not None and st.lhs == previous else latex(st.lhs)
            rel = _RELATIONS[st.relation]
            reason = r"\color{gray}{" + reason_to_latex(st.reason) + "}" + st.badge_latex()
            lines.append(f"{left} &{rel} {latex(st.rhs)} && {reason}")
            previous = st.rhs
        if self.unfold:
            lines += [r"& \quad " + (r"\text{where } " if k == 0 else r"\phantom{\text{where }} ") + line for k, line in enumerate(self.unfold.latex())]
        return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"

    def rows(self) -> list[dict]:
        """The chain as data for a page that lays it out to fit: per step, each side cut at its top-level sum.

        Each row holds ``lhs`` (empty where the step continues the previous one)
        and ``rhs`` as lists of :func:`~derivations.notation.latex_terms`, the
        relation, and the reason (with its badges) as LaTeX; the definitions
        follow as rows with only ``rhs``.  :meth:`to_latex` is the same chain as
        one ``aligned`` block.
        """
        out, previous = [], None
        for st in self.steps:
            left = [] if previous is not None and st.lhs == previous else latex_terms(st.lhs)
            out.append({"lhs": left, "rel": _RELATIONS[st.relation], "rhs": latex_terms(st.rhs), "reason": st.reason_pieces()})
            previous = st.rhs
        if self.unfold:
            lines = [[f"{latex(lhs)} :=", *latex_terms(rhs)] for lhs, rhs in self.unfold.entries.items()]
            lines += [[line] for line in self.unfold.latex()[len(lines):]]
            for k, pieces in enumerate(lines):
                lead = r"\text{where } " if k == 0 else r"\phantom{\text{where }} "
                out.append({"lhs": [], "rel": "", "rhs": [lead + pieces[0], *pieces[1:]], "reason": []})
        return out

    def _repr_latex_(self) -> str:
        return "$$" + self.to_latex() + "$$"

    def __repr__(self) -> str:
        state = "verified" if self.verified else "unverified"
        return f"<Derivation {self.title!r}: {len(self.steps)} steps, {state}>"


def _sympify(x):
    if isinstance(x, sp.MatrixBase):
        return sp.ImmutableMatrix(x)
    if isinstance(x, (list, tuple)):
        return sp.ImmutableMatrix(x)
    return sp.sympify(x)
