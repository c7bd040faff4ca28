"""``python -m numasim``."""

import sys

from numasim.cli import main

sys.exit(main())
