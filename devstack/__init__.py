"""Dev-only tooling: the local stack, the dev console and provisioning (never shipped to Lambda)."""
