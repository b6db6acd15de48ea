"""Build configuration: defaults validate and round-trip, invalid values name the parameter, the value and
what is allowed, TOML files with sections, file and key named in errors, overrides."""
from __future__ import annotations

import pytest

from sirerag.core.config import BuildConfig, ChunkingConfig, ClusteringConfig, load_config
from sirerag.core.errors import ConfigError


def test_defaults_validate_and_round_trip():
    config = BuildConfig().validate()
    assert config.trees == ("similarity", "relatedness")
    again = BuildConfig.from_dict(config.to_dict())
    assert again == config


@pytest.mark.parametrize(
    "config, message",
    [
        (BuildConfig(chunking=ChunkingConfig(mode="sentences")), r"chunking\.mode must be one of 'tokens', 'passage', got 'sentences'"),
        (BuildConfig(clustering=ClusteringConfig(threshold=1.5)), r"clustering\.threshold must be a probability in \(0, 1\), got 1\.5"),
        (BuildConfig(trees=("similarity", "graph")), r"trees must be a tuple of distinct values"),
        (BuildConfig(seed=-1), r"seed must be an integer from 0 to 2\*\*32 - 1, got -1"),
    ],
)
def test_invalid_values_name_parameter_value_and_allowed(config, message):
    with pytest.raises(ConfigError, match=message):
        config.validate()


def test_toml_file_with_sections(tmp_path):
    path = tmp_path / "build.toml"
    path.write_text('trees = ["similarity"]\nseed = 3\n[chunking]\nmode = "passage"\n[tree]\nlevels = 3\n')
    config = load_config(path).validate()
    assert config.trees == ("similarity",) and config.seed == 3
    assert config.chunking.mode == "passage" and config.tree.levels == 3
    assert config.clustering == ClusteringConfig()


def test_toml_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[chunking]\nmode = 'tokens'\nwindow = 3\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: \[chunking\]: unknown setting\(s\) \['window'\]"):
        load_config(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("seed = = 3\n")
    with pytest.raises(ConfigError, match=r"broken\.toml: not valid TOML"):
        load_config(broken)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.toml")


def test_overrides_replace_only_named_fields():
    config = BuildConfig().with_overrides(trees=(), chunking={"mode": "passage"})
    assert config.trees == () and config.chunking.mode == "passage" and config.chunking.max_tokens == 100
    with pytest.raises(ConfigError, match="unknown setting"):
        BuildConfig().with_overrides(chunking={"size": 5})
