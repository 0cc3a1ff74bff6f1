"""`python -m mwpgen generate ...`: the same command line as the `mwpgen` console script (mwpgen/cli.py)."""

import sys

from mwpgen.cli import main

sys.exit(main())
