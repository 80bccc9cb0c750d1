"""What the front ends read back from the results cache and report: :class:`Finding` (one
finding of a rule) and :class:`Settings` (the rule options).

They are defined with the rules (:mod:`jaxlint.checkers.base`); the front ends import them
from here so that a warm run, which only reads findings back from the cache, depends on
this module alone.
"""
from .checkers.base import DEFAULT_PROFILE, STRICT_PROFILE, Finding, Settings

__all__ = ["DEFAULT_PROFILE", "STRICT_PROFILE", "Finding", "Settings"]
