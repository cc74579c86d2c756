"""`python -m support ...` runs the `bisn` command line."""

from support.cli import main

main()
