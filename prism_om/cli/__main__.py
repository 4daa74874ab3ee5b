"""``python -m prism_om.cli``."""

import sys

from .app import main

sys.exit(main())
