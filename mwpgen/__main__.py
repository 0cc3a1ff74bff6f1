"""`python -m mwpgen generate ...`: the same command line as the `mwpgen` console script (mwpgen/generate/cli.py)."""

import sys

from mwpgen.generate.cli import main

sys.exit(main())
