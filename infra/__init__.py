"""Deployment tooling: the IAM policies of each function and the finishing step of `make package`."""
