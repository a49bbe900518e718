"""`python -m schemashift.cli ...`: the `schemashift` command without its console script."""

import sys

from schemashift.cli import main

sys.exit(main())
