"""``python -m steerable`` and the ``steerable`` console script."""

from __future__ import annotations

import sys

from steerable.cli import main

if __name__ == "__main__":
    sys.exit(main())
