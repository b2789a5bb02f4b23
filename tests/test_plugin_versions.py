"""A plugin's source cannot change without a `version` bump going unnoticed: grid cell ids cover
plugin versions, so an unbumped behaviour change would mix old and new results under one id."""

from __future__ import annotations

import json

from plugin_versions import RECORD, current, plugin_modules, problems, source_digest


def test_every_plugin_s_source_matches_its_recorded_version():
    found = problems(json.loads(RECORD.read_text(encoding="utf-8")), current())
    assert not found, "\n".join(found)


def test_an_unbumped_change_is_caught_and_a_bump_asks_for_a_refresh():
    recorded = {"attacks": {"ps": {"version": "1", "source_digest": "a"}}}
    changed = {"attacks": {"ps": {"version": "1", "source_digest": "b"}}}
    (line,) = problems(recorded, changed)
    assert "'ps': its source changed but its `version` is still '1'; bump `version`" in line
    bumped = {"attacks": {"ps": {"version": "2", "source_digest": "b"}}}
    (line,) = problems(recorded, bumped)
    assert "version '1' -> '2'; then refresh plugin_versions.json" in line
    assert problems(recorded, recorded) == []
    assert "is new" in problems({}, changed)[0] and "no longer registered" in problems(changed, {})[0]


def test_the_digest_ignores_docstrings_comments_and_layout_but_not_code():
    code = 'def f(x):\n    """Doc."""\n    return x + 1\n'
    assert source_digest(code) == source_digest('def f(x):  # note\n    """Other doc."""\n\n    return (x + 1)\n')
    assert source_digest(code) != source_digest('def f(x):\n    """Doc."""\n    return x + 2\n')
    assert source_digest(code) != source_digest('def f(x):\n    return f"{x}"\n')


def test_a_plugin_in_its_own_subpackage_is_digested_whole():
    from ragleak.attacks import ATTACKS
    from ragleak.defenses import DEFENSES

    modules = plugin_modules(ATTACKS.get("asymmetry"), "attacks")
    assert "ragleak.attacks.asymmetry.classifier" in modules and "ragleak.attacks.asymmetry.attack" in modules
    assert plugin_modules(DEFENSES.get("pad"), "defenses") == ["ragleak.defenses.pad"]
