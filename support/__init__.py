"""`bisn`: the support command line for a shop's staff (dev-only tooling; never shipped to Lambda)."""
