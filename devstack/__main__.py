"""`python -m devstack`: run the local stack (see devstack/runner.py)."""

import sys

from devstack.runner import main

sys.exit(main())
