"""pytest's entry to the hostile suite: the `hs` fixture lives in hostile.py
(a module of its own name, so this suite can be collected together with
tests/e2e, whose conftest is another module)."""
from hostile import hs  # noqa: F401
