"""The variant checker's entry points that the trainer-code checks build on, imported in one place.

They move from :mod:`derivations.variants` to :mod:`numeric.variants` (issue 17)
with the same signatures; switching is the one import line below.
"""

from derivations.variants import VERDICTS, NotPermutationEquivariant, TokenReport
from numeric.variants import check_group_advantage, check_token_loss

__all__ = ["VERDICTS", "NotPermutationEquivariant", "TokenReport", "check_group_advantage", "check_token_loss"]
