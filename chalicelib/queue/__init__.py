"""The jobs queue: the messages it carries, sending them, and the jobs a write owes it."""
