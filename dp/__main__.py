"""`python -m dp`: the command line (`dp.cli`)."""
import sys

from .cli import main

sys.exit(main())
