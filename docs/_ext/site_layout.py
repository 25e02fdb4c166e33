r"""Small build-time touches that make the pages read well at every width.

* **Figures.** Each ``.. plot::`` becomes one numbered figure, with its
  plotting source folded under it (:data:`PLOT_TEMPLATE`, set as the
  matplotlib directive's ``plot_template``). Matplotlib's own template writes
  every figure twice, once for HTML and once for other builders, and Sphinx
  numbers both, so the figure numbers of a chapter went 1, 3, 5.
* **Alt text.** A figure's image without an explicit ``:alt:`` gets its
  caption as alt text, with the caption's math written out in plain
  characters (:func:`plain_math`), instead of the image's file name.
* **Contents menu.** ``_static/contents-menu.js`` makes the article header's
  "Contents" button open the page's contents (the theme wired only the
  navbar's hidden button).
* **Table cells.** A cell that holds one hyphenated word (a mode name such as
  ``seq-mean-token-mean``) is marked ``nowrap``: it is not broken at its
  hyphens. A formula in a cell cannot wrap (MathJax 3 breaks no inline math),
  so the words and code inside a cell's formula — its top-level ``\text{...}``
  and ``\mathtt{...}`` — are taken out of it as text and inline code
  (:func:`split_cell_math`), which wrap; that is what lets the computed tables
  of the losses chapter fit the text column at 1,280 px.
"""

import re

from docutils import nodes

PLOT_TEMPLATE = r"""
.. container:: plot-figure

   {% for img in images %}
   .. figure:: {{ build_dir }}/{{ img.basename }}.{{ default_fmt }}
      {% for option in options -%}
      {{ option }}
      {% endfor %}

      {{ caption }}  {# the directive indents it by six #}
   {% endfor %}

{% if source_code %}
.. admonition:: Plotting source
   :class: dropdown plot-source

{{ source_code | indent(3, true) }}
{% endif %}
"""

# LaTeX commands written out as the characters they print
_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ",
    "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Sigma": "Σ", "Pi": "Π",
    "nabla": "∇", "sum": "Σ", "prod": "Π", "infty": "∞", "cdot": "·", "times": "×", "pm": "±",
    "mp": "∓", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠", "approx": "≈",
    "in": "∈", "to": "→", "rightarrow": "→", "sim": "~", "lVert": "‖", "rVert": "‖", "|": "‖",
    "langle": "⟨", "rangle": "⟩", "lvert": "|", "rvert": "|", "ldots": "…", "dots": "…",
    "cdots": "…", "mid": "|", "E": "E", "sg": "sg", "log": "log", "exp": "exp", "min": "min",
    "max": "max",
}
_OPERATORS = {"sum", "prod", "nabla"}
_SPACES = {",", ";", ":", "!", " ", "quad", "qquad", "left", "right", "big", "Big", "bigl",
           "bigr", "Bigl", "Bigr", "displaystyle", "tfrac", "dfrac"}


def _group(text: str) -> str:
    """``text``, in parentheses when it is more than one symbol."""
    text = text.strip()
    return text if len(text) <= 1 or text.isalnum() else f"({text})"


def plain_math(latex: str) -> str:
    r"""A formula in plain characters, for alt text: ``\lVert s(o)\rVert^2`` -> ``‖s(o)‖^2``.

    Examples
    --------
    >>> plain_math(r"\mathbb{E}[(R - b)\,s]")
    'E[(R - b) s]'
    >>> plain_math(r"\frac{1}{G-1}\sum_{j \ne i} R_j")
    '1/(G-1) Σ_(j ≠ i) R_j'
    """
    text = re.sub(r"\\(?:mathbb|mathrm|mathtt|mathbf|mathcal|operatorname|text|textrm|boldsymbol)\s*\{([^{}]*)\}",
                  r"\1", latex)
    text = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}",
                  lambda m: f"{_group(m.group(1))}/{_group(m.group(2))}", text)

    def command(m):
        name = m.group(1)
        if name in _SPACES:
            return " "
        lead = " " if name in _OPERATORS else ""
        return lead + _SYMBOLS.get(name, name) + (" " if name.isalpha() and m.group(2) else "")

    text = re.sub(r"\\([A-Za-z]+|[,;:! |])(\s?)", command, text)
    text = re.sub(r"([\^_])\{([^{}]*)\}", lambda m: m.group(1) + _group(m.group(2)), text)
    text = text.replace("{", "").replace("}", "")
    return " ".join(text.split())


def caption_text(caption: nodes.Node) -> str:
    """The text of a caption, its math written out by :func:`plain_math`."""
    parts = []
    for node in caption.findall(lambda n: isinstance(n, (nodes.Text, nodes.math))):
        if isinstance(node, nodes.math):
            parts.append(plain_math(node.astext()))
        elif not isinstance(node.parent, nodes.math):
            parts.append(node.astext())
    return " ".join("".join(parts).split())


def describe_figures(app, doctree):
    """Alt text for every figure image that has none: the figure's caption."""
    for figure in doctree.findall(nodes.figure):
        captions = list(figure.findall(nodes.caption))
        for image in figure.findall(nodes.image):
            if not image.get("alt") and captions:
                image["alt"] = caption_text(captions[0])


def unbroken_cells(app, doctree, docname):
    """Mark table cells that hold a single hyphenated word, so they do not break at hyphens."""
    for entry in doctree.findall(nodes.entry):
        text = entry.astext().strip()
        if "-" in text and not any(c.isspace() for c in text):
            entry["classes"].append("nowrap")


def _unescape(latex: str) -> str:
    r"""The characters a ``\text``/``\mathtt`` argument prints: ``policy\_loss`` -> ``policy_loss``."""
    return re.sub(r"\\([_#&%{}$ ])", r"\1", latex)


def math_pieces(latex: str) -> list[tuple[str, str]]:
    r"""A formula cut at its top-level ``\text{...}`` and ``\mathtt{...}``: ``[(kind, text)]``.

    ``kind`` is ``"math"`` (a formula to typeset), ``"text"`` or ``"code"``;
    text and code are unescaped, formulas are stripped, and a piece that is
    only white space is dropped. A ``\text`` inside a group (a fraction, a
    subscript), an environment (``\begin{cases}``) or a ``\left...\right``
    pair stays in its formula.

    Examples
    --------
    >>> math_pieces(r"1/C\ (C = \mathtt{B * max\_len})")
    [('math', '1/C\\ (C ='), ('code', 'B * max_len'), ('math', ')')]
    >>> math_pieces(r"\text{on policy } (w(1, A) = 1)")
    [('text', 'on policy '), ('math', '(w(1, A) = 1)')]
    >>> math_pieces(r"\frac{\text{a}}{b}")
    [('math', '\\frac{\\text{a}}{b}')]
    >>> [kind for kind, _ in math_pieces(r"\begin{cases} 0 & \text{for } r < 1 \end{cases} \text{ or } \left(\text{a}\right)")]
    ['math', 'text', 'math']
    """
    pieces, depth, i, start = [], 0, 0, 0
    while i < len(latex):
        ch = latex[i]
        if ch == "\\":
            env = re.match(r"\\(begin|end)\{[^{}]*\}|\\(left|right)\b", latex[i:])
            if env:  # \begin{name} ... \end{name} and \left ... \right nest like a group
                depth += 1 if "begin" in env.groups() or "left" in env.groups() else -1
                i += env.end()
                continue
            m = re.match(r"\\(text|mathtt)\{", latex[i:])
            if m and depth == 0:
                j, level = i + m.end(), 1
                while j < len(latex) and level:
                    level += {"{": 1, "}": -1}.get(latex[j], 0) if latex[j - 1] != "\\" else 0
                    j += 1
                pieces.append(("math", latex[start:i]))
                pieces.append(("code" if m.group(1) == "mathtt" else "text", _unescape(latex[i + m.end():j - 1])))
                i = start = j
                continue
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        i += 1
    pieces.append(("math", latex[start:]))
    out = []
    for kind, text in pieces:
        if kind == "math":
            text = text.strip()
            if text.endswith("\\"):  # a "\ " space cut in half
                text = text[:-1].strip()
        if text.strip():
            out.append((kind, text))
    return out


def split_cell_math(app, doctree, docname):
    """In table cells, take the words and code out of each formula so that they wrap (see :func:`math_pieces`)."""
    for entry in doctree.findall(nodes.entry):
        for math in list(entry.findall(nodes.math)):
            pieces = math_pieces(math.astext())
            if [kind for kind, _ in pieces] in (["math"], []):
                continue
            new = []
            for kind, text in pieces:
                if new and kind != "text" and not (new[-1].astext().endswith(" ") or text.startswith((")", ",", "."))):
                    new.append(nodes.Text(" "))
                if kind == "math":
                    new.append(nodes.math(text, text))
                elif kind == "code":
                    new.append(nodes.literal(text, text))
                else:
                    new.append(nodes.Text(text))
            math.replace_self(new)


def break_after_equals(app, doctree, docname):
    """In table cells, a long word with ``=`` (``norm=num_items_in_batch``) may break after the ``=``.

    The break is an HTML ``<wbr>``: it prints nothing and is not copied.
    """
    for entry in doctree.findall(nodes.entry):
        for text in list(entry.findall(nodes.Text)):
            if isinstance(text.parent, (nodes.literal, nodes.math, nodes.raw)) or "=" not in text:
                continue
            if not any(len(word) > 12 and "=" in word for word in text.split()):
                continue
            parts = []
            for i, piece in enumerate(str(text).split("=")):
                if i:
                    parts += [nodes.Text("="), nodes.raw("", "<wbr>", format="html")]
                if piece:
                    parts.append(nodes.Text(piece))
            text.parent.replace(text, parts)


def setup(app):
    app.connect("doctree-read", describe_figures)
    app.connect("doctree-resolved", split_cell_math)
    app.connect("doctree-resolved", unbroken_cells)
    app.connect("doctree-resolved", break_after_equals)
    app.add_js_file("contents-menu.js")  # docs/_static: the article header's Contents button opens the drawer
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
