"""The shop's dashboard: staff sign-in (Cognito), token checks, read models and audited support actions."""
