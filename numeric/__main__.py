"""``python -m numeric``: print the check report (see :mod:`numeric.report`)."""

import sys

from .report import main

sys.exit(main())
