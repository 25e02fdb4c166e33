r"""Small build-time touches that make the pages read well at every width.

* **Figures.** Each ``.. plot::`` becomes one numbered figure, with its
  plotting source folded under it (:data:`PLOT_TEMPLATE`, set as the
  matplotlib directive's ``plot_template``). Matplotlib's own template writes
  every figure twice, once for HTML and once for other builders, and Sphinx
  numbers both, so the figure numbers of a chapter went 1, 3, 5.
* **Alt text.** A figure's image without an explicit ``:alt:`` gets its
  caption as alt text, with the caption's math written out in plain
  characters (:func:`plain_math`), instead of the image's file name.
* **Table cells.** A cell that holds one hyphenated word (a mode name such as
  ``seq-mean-token-mean``) is marked ``nowrap``: it is not broken at its
  hyphens, and a table that grows too wide scrolls in its own box.
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


def setup(app):
    app.connect("doctree-read", describe_figures)
    app.connect("doctree-resolved", unbroken_cells)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
