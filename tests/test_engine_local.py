"""The engine seam without Ray: settings, the missing extra, and LLM calls spread over several
endpoints by the local engine (stand-in HTTP servers), cached on the driver."""
from __future__ import annotations

import argparse
import logging
import sys

import pytest
from _llm_server import FlakyServer, free_port

from sirerag.cli.build import config_from_args, register
from sirerag.core.config import BuildConfig, EngineConfig
from sirerag.engine import LocalEngine, make_engine
from sirerag.core.errors import ConfigError, MissingExtraError
from sirerag.llm.base import LLMRequest
from sirerag.llm.factory import load_llm, parse_spec


def test_engine_settings_are_checked_before_any_work():
    with pytest.raises(ConfigError, match=r"^engine\.name must be one of 'local', 'ray', got 'spark'"):
        BuildConfig(engine=EngineConfig(name="spark")).validate()
    with pytest.raises(ConfigError, match=r"^engine\.actors must be an integer >= 1, got 0"):
        EngineConfig(actors=0).validate()
    with pytest.raises(ConfigError, match=r"\[engine\]: unknown setting\(s\) \['workers'\]"):
        BuildConfig.from_dict({"engine": {"workers": 2}})
    assert BuildConfig.from_dict({"engine": {"name": "ray", "actors": 4}}).engine.actors == 4


def test_ray_address_on_the_command_line_chooses_the_ray_engine(tmp_path):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["build", "c.jsonl", "--out", str(tmp_path), "--ray-address", "ray://10.0.0.5:10001"])
    engine = config_from_args(args).engine
    assert (engine.name, engine.address) == ("ray", "ray://10.0.0.5:10001")
    assert config_from_args(parser.parse_args(["build", "c.jsonl"])).engine.name == "local"


def test_the_ray_engine_without_its_extra_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails
    with pytest.raises(MissingExtraError, match=r"pip install 'sirerag\[ray\]'"):
        make_engine(EngineConfig(name="ray"))
    assert isinstance(make_engine(EngineConfig()), LocalEngine)


def test_a_list_of_servers_is_parsed_and_checked():
    parsed = parse_spec("openai:m@http://a:1/v1, http://b:2/v1")
    assert parsed.base_urls == ("http://a:1/v1", "http://b:2/v1") and parsed.base_url == "http://a:1/v1"
    with pytest.raises(ConfigError, match=r"a list of servers starts after @"):
        parse_spec("openai:m,http://b:2/v1")
    with pytest.raises(ConfigError, match=r"server URL must be http:// or https:// with a host, e.g. http://HOST:PORT/v1"):
        parse_spec("openai:m@http://a:1/v1,ftp://b/v1")


def test_calls_are_spread_over_the_live_servers_and_cached_here(tmp_path, caplog):
    down = f"http://127.0.0.1:{free_port()}/v1"
    requests = [LLMRequest(messages=(("user", f"question {i}"),), max_tokens=8) for i in range(6)]
    with FlakyServer() as first, FlakyServer() as second:
        spec = f"openai:m@{first.url},{down},{second.url}"
        with caplog.at_level(logging.WARNING, logger="sirerag.llm.remote"):
            llm = load_llm(spec, cache_dir=tmp_path, engine=LocalEngine(), engine_batch_size=1)
        assert f"LLM endpoint {down} is down" in caplog.text
        answers = llm.complete_many(requests)
        assert [a.text for a in answers] == [f"echo: question {i}" for i in range(6)]
        assert len(first.bodies) == len(second.bodies) == 3  # batches alternate between the live servers
        again = load_llm(spec, cache_dir=tmp_path, engine=LocalEngine()).complete_many(requests)
        assert all(a.cached for a in again)
        assert len(first.bodies) + len(second.bodies) == 6  # the rerun made no call
    assert llm.spec == "openai:m"  # the cache key does not depend on the servers


def test_every_server_down_is_a_config_error(tmp_path):
    urls = ",".join(f"http://127.0.0.1:{free_port()}/v1" for _ in range(2))
    with pytest.raises(ConfigError, match=r"every LLM endpoint of openai:m is down"):
        load_llm(f"openai:m@{urls}", cache_dir=tmp_path)
