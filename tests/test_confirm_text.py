"""Wording of confirmation verdicts: where an error was raised, and messages cut to length."""
from __future__ import annotations

from jaxlint.confirm.text import clip

FLAX = ("Can't set posemb_dim=4 for Module of type AddPositionEmbs: Module instance is frozen outside of "
        "setup method. (https://flax.readthedocs.io/en/latest/api_reference/flax.errors.html"
        "#flax.errors.SetAttributeFrozenModuleError)")


def test_clip_never_cuts_a_url():
    out = clip(FLAX)
    assert "https://" not in out and out.endswith("setup method. ...")
    # a URL that starts early is kept whole rather than leaving too little of the message
    early = "see https://example.com/" + "a" * 200 + " for more"
    out = clip(early)
    assert "https://example.com/" + "a" * 200 in out
    assert clip("short") == "short"
    assert clip("y" * 200) == "y" * 157 + "..."


def test_where_reads_after_failed():
    from jaxlint.confirm.probes import ErrorInfo
    path = __file__

    def boom():
        raise ValueError("x")
    try:
        boom()
    except ValueError as exc:
        info = ErrorInfo(exc, {path})
    assert info.where().startswith("at line ")
    try:
        raise ValueError("y")
    except ValueError as exc:
        assert ErrorInfo(exc, {"/elsewhere.py"}).where().startswith(("at ", "inside JAX"))
