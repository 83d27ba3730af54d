"""``python3 -m spawnpool run ...``: the command-line runner (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
