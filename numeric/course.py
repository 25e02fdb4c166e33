"""The course's environment, as a drop-in module: ``from numeric.course import *``.

Code written against a float64 default (notebooks that made float64 torch's
default dtype and named every function directly) imports this module.  Importing this
module does both: it sets the default dtype to ``torch.float64`` (a global
change, which is why :mod:`numeric` itself does not make it) and re-exports
everything in ``numeric.__all__``, with :class:`TinyLM` answering to the
helper's method names too (``token_logprobs``, ``seq_logprob``; the package
spells them ``token_log_probs``, ``sequence_log_prob``).  A notebook replaces its helper import by
``from numeric.course import *`` and runs unchanged.

Examples
--------
>>> import torch
>>> from numeric.course import TinyLM, ppo_loss, use_course_defaults
>>> use_course_defaults()          # what importing the module did (again, if it was imported before)
>>> torch.get_default_dtype()
torch.float64
"""

import torch


def use_course_defaults() -> None:
    """Make float64 torch's default dtype, as the course notebooks assume."""
    torch.set_default_dtype(torch.float64)


use_course_defaults()

from numeric import *  # noqa: E402,F403
from numeric import TinyLM as _TinyLM  # noqa: E402
from numeric import __all__ as _numeric_all  # noqa: E402


class TinyLM(_TinyLM):  # type: ignore[no-redef]  # shadows the star import's numeric.TinyLM on purpose
    """:class:`numeric.TinyLM` that also answers to the course helper's method names ``token_logprobs`` and ``seq_logprob``."""

    def token_logprobs(self, theta: torch.Tensor) -> torch.Tensor:
        """The course's name for :meth:`numeric.TinyLM.token_log_probs`."""
        return self.token_log_probs(theta)

    def seq_logprob(self, theta: torch.Tensor) -> torch.Tensor:
        """The course's name for :meth:`numeric.TinyLM.sequence_log_prob`."""
        return self.sequence_log_prob(theta)


__all__ = [*_numeric_all, "use_course_defaults"]
