from __future__ import annotations

import pytest

from ragleak.config import StackConfig, load_stack_config
from ragleak.errors import ConfigError


def test_defaults_are_the_documented_stack():
    cfg = StackConfig()
    assert (cfg.model, cfg.embedder, cfg.top_k, cfg.decoding.temperature) == ("qwen2.5-coder-0.5b", "all-MiniLM-L6-v2", 5, 0.0)


def test_yaml_top_level_and_stack_section(tmp_path):
    (tmp_path / "a.yaml").write_text("top_k: 3\nseed: 7\n")
    (tmp_path / "b.yaml").write_text("stack:\n  top_k: 2\n  decoding:\n    max_tokens: 64\n")
    assert load_stack_config(tmp_path / "a.yaml").top_k == 3
    cfg = load_stack_config(tmp_path / "b.yaml")
    assert cfg.top_k == 2 and cfg.decoding.max_tokens == 64


@pytest.mark.parametrize(
    "body, field",
    [
        ("top_k: 0\n", "top_k"),
        ("top_k: many\n", "top_k"),
        ("modle: qwen\n", "modle"),
        ("model: gpt-17\n", "model"),
        ("decoding:\n  temperature: -1\n", "decoding.temperature"),
    ],
)
def test_bad_field_is_named_in_one_error(tmp_path, body, field):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_stack_config(path)
    assert f"invalid field '{field}'" in str(info.value) and str(path) in str(info.value)


def test_cross_field_checks(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("chunk_words: 50\nchunk_overlap: 50\n")
    with pytest.raises(ConfigError, match="chunk_overlap"):
        load_stack_config(path)


def test_not_yaml_and_not_a_mapping(tmp_path):
    (tmp_path / "x.yaml").write_text("top_k: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_stack_config(tmp_path / "x.yaml")
    (tmp_path / "y.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_stack_config(tmp_path / "y.yaml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_stack_config(tmp_path / "missing.yaml")
