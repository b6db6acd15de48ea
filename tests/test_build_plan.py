"""One build plan (issue 27): the build, the incremental update and the dry run walk the same stages.

Over the whole grid of ``--trees`` (none, similarity, relatedness, both) x ``--graph`` (off, on) x
``--extractor`` (offline, llm):

- the plan's stages follow the build's rules (extraction with the relatedness tree *or* the graph),
  every stage reads only what an earlier stage gives, and the models it names are those the settings use;
- the dry run reports exactly the plan's stages through ``on_stage`` and counts the extraction calls of
  every plan with an LLM extraction stage (``--trees similarity --graph --extractor llm`` included);
- (slow) a real build reports the plan's stages through ``on_stage``, and the LLM requests it sends in each
  stage (a scripted OpenAI-compatible server answers them) are those the dry run counted for that stage;
  an ``add`` of one document walks the same plan with the incremental runner.
"""
from __future__ import annotations

import itertools
from collections import Counter

import pytest
from _llm_server import FlakyServer
from _scripted import SCRIPTED_DOCS, prompt_kind, scripted_reply

from sirerag.core.config import BuildConfig
from sirerag.pipeline.dryrun import dry_run
from sirerag.pipeline.plan import MODELS, BuildPlan

TREES = [(), ("similarity",), ("relatedness",), ("similarity", "relatedness")]
GRID = list(itertools.product(TREES, (False, True), ("offline", "llm")))
IDS = [f"{'+'.join(t) or 'none'}-{'graph' if g else 'nograph'}-{e}" for t, g, e in GRID]
DEAD = "openai:scripted@http://127.0.0.1:9/v1"  # parsed, never called


def config(trees: tuple[str, ...], graph: bool, extractor: str, llm: str | None = None, *,
           extraction_llm: str | None = None) -> BuildConfig:
    """Small, fast settings: one chunk per document, one summary level, no retry."""
    extraction = {"extractor": extractor, "max_attempts": 1, "rewrite_max_tokens": 64, "extract_max_tokens": 160}
    if extraction_llm:
        extraction["llm"] = extraction_llm
    overrides = {"trees": trees, "graph": {"enabled": graph}, "chunking": {"mode": "passage"},
                 "tree": {"levels": 2, "summary_max_tokens": 32}, "extraction": extraction}
    if llm:
        overrides["llm"] = {"spec": llm, "max_concurrency": 1}
    return BuildConfig().with_overrides(**overrides).validate()


class Events:
    """An ``on_stage`` hook that checks every stage ends right after it starts, and keeps the order."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []
        self.marks: list[int] = []  # requests sent so far, at each start and end (with a server)
        self.server: FlakyServer | None = None

    def __call__(self, stage: str, event: str, seconds: float) -> None:
        if event == "start":
            assert len(self.started) == len(self.ended) and seconds == 0.0
            self.started.append(stage)
        else:
            assert event == "end" and self.started[-1] == stage and seconds >= 0.0
            self.ended.append(stage)
        self.marks.append(len(self.server.bodies) if self.server else 0)

    def names(self) -> list[str]:
        assert self.started == self.ended
        return self.started

    def requests(self) -> dict[str, Counter]:
        """Kinds of request sent during each stage (stages that sent none are left out)."""
        out: dict[str, Counter] = {}
        for i, stage in enumerate(self.started):
            bodies = self.server.bodies[self.marks[2 * i]:self.marks[2 * i + 1]]
            if bodies:
                out[stage] = Counter(prompt_kind(b) for b in bodies)
        return out


@pytest.mark.parametrize("trees, graph, extractor", GRID, ids=IDS)
def test_the_plan_follows_the_build_rules(trees, graph, extractor):
    cfg = config(trees, graph, extractor, DEAD)
    plan = BuildPlan.from_config(cfg)
    extraction = "relatedness" in trees or graph
    assert plan.names == tuple(name for name, on in [
        ("load", True), ("query_export", True), ("embed_leaves", True), ("similarity_tree", "similarity" in trees),
        ("extraction", extraction), ("relatedness_tree", "relatedness" in trees), ("pool", True), ("bm25", True),
        ("ann", True), ("graph", graph)] if on)
    given = {"corpus"}
    for stage in plan:
        assert set(stage.needs) <= given, (stage.name, stage.needs, given)
        assert set(stage.models) <= set(MODELS)
        given |= set(stage.gives)
    assert ("extraction_llm" in plan.models) == (extraction and extractor == "llm")
    assert ("summarizer" in plan.models) == bool(trees)
    assert "query_export" not in BuildPlan.from_config(cfg.with_overrides(embedder={"spec": "minilm-onnx"}))
    assert plan.stage("pool").writes[:2] == ("entries.jsonl", "embeddings.npy")
    with pytest.raises(KeyError, match="the plan has no stage 'colbert'"):
        plan.stage("colbert")


@pytest.mark.parametrize("trees, graph, extractor", GRID, ids=IDS)
def test_the_dry_run_walks_the_plan_and_counts_every_extraction_call(trees, graph, extractor):
    """No model is loaded: the LLM is only the extractor's, so no tree is clustered for the estimate."""
    docs = SCRIPTED_DOCS[:3]
    cfg = config(trees, graph, extractor, extraction_llm=DEAD if extractor == "llm" else None)
    events = Events()
    report = dry_run(docs, cfg, show_progress=False, on_stage=events)
    plan = BuildPlan.from_config(cfg)
    assert events.names() == list(plan.names) == report.plan
    assert {s.plan_stage for s in report.stages} <= set(plan.names)
    calls = Counter()
    for row in report.stages:
        calls[row.stage] += row.calls
    if "extraction" in plan and extractor == "llm":  # one rewrite and one extraction call per chunk
        assert calls == {"coreference rewrite": 3, "proposition extraction": 3}
        assert {s.plan_stage for s in report.stages} == {"extraction"}
    else:
        assert report.stages == [] and report.total().calls == 0
        assert any("no LLM configured" in n or "no stage of this build calls" in n for n in report.notes)


@pytest.mark.slow
@pytest.mark.parametrize("trees, graph, extractor", GRID, ids=IDS)
def test_build_dry_run_and_update_walk_the_same_stages(tmp_path, trees, graph, extractor):
    """A real build (LLM requests answered by a scripted server), its dry run and an add of one document."""
    from sirerag.pipeline.build import build_index
    from sirerag.pipeline.update import update_index

    with FlakyServer(reply=scripted_reply) as server:
        cfg = config(trees, graph, extractor, f"openai:scripted@{server.url}" if extractor == "llm" else None)
        plan = list(BuildPlan.from_config(cfg).names)
        planned = Events()
        report = dry_run(SCRIPTED_DOCS[:3], cfg, show_progress=False, on_stage=planned)
        assert not server.bodies  # the dry run called no model
        built = Events()
        built.server = server
        out = tmp_path / "index"
        build = build_index(SCRIPTED_DOCS[:3], out, cfg, cache_dir=tmp_path / "cache", show_progress=False,
                            on_stage=built)
        assert built.names() == planned.names() == report.plan == plan == list(build.timings)

        sent = built.requests()
        counted: dict[str, Counter] = {}
        for row in report.stages:
            counted.setdefault(row.plan_stage, Counter())[row.stage] += row.calls
        assert set(sent) <= {"similarity_tree", "extraction", "relatedness_tree"}
        if "extraction" in sent or "extraction" in counted:
            assert sent["extraction"] == {"rewrite": 3, "extract": 3}
            assert counted["extraction"] == {"coreference rewrite": 3, "proposition extraction": 3}
        if "similarity_tree" in sent or "similarity_tree" in counted:  # one summary level: exact
            assert sum(counted["similarity_tree"].values()) == sent["similarity_tree"]["summary"] > 0
        if "relatedness_tree" in sent:  # estimated on offline propositions: a level is planned when one is sent
            assert sum(counted["relatedness_tree"].values()) > 0

        updated = Events()
        updated.server = server
        update = update_index(out, add=SCRIPTED_DOCS[3:], cache_dir=tmp_path / "cache", on_stage=updated)
        assert update.changed and updated.names() == plan
        if "extraction" in plan and extractor == "llm":  # only the new document is extracted
            assert updated.requests()["extraction"] == {"rewrite": 1, "extract": 1}
        assert set(updated.requests()) <= {"similarity_tree", "extraction", "relatedness_tree"}
