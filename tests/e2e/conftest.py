"""pytest wiring: the harness lives in harness.py so tests can import its helpers."""
from harness import session  # noqa: F401  (the fixture)
