"""The settings of the default retriever (Personalized PageRank, ``ppr``), in one place.

:class:`PPRSettings` holds every setting a PPR search reads, each with its default, its check and its
description: its own fields, :class:`BridgeSettings` (query-conditioned bridging through propositions) and
:class:`PoolRule` (how summaries and aggregates join the passages in a ranking). Everything else derives from
these fields: the options of ``sirerag.retrievers.ppr.load`` (:meth:`PPRSettings.option_names`), the pool
options of every retriever, the ``sirerag search`` flags, the pool rule a search reports, and the settings table
of docs/ppr.md (:func:`settings_table`). Not a build setting: an index does not record them (the PageRank
``damping``, ``tol`` and ``max_iter`` default to the values the graph recorded, :class:`GraphConfig`).
"""
from __future__ import annotations

import typing
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, Literal, TypeVar

from sirerag.core.config.typecheck import check_types, describe
from sirerag.core.errors import ConfigError, check

_T = TypeVar("_T")

#: ``linking`` choices: surface matches then HippoRAG v1's entities-to-nodes, or HippoRAG 2's query-to-fact
Linking = Literal["ner", "fact"]
#: ``passage_seeds`` choices: the dense score, or dense and BM25 min-max normalised and mixed
PassageSeeds = Literal["dense+bm25", "dense"]
#: ``pool_rule`` choices: the rule of :mod:`sirerag.retrievers.pool_rank`, or the retriever's own ranking
PoolMode = Literal["passages", "native"]
#: ``bridge_residual_by`` choices: embed what is left of the question, or score by the query's own vector
ResidualBy = Literal["rest", "question"]
#: how PageRank is computed (docs/ppr.md)
Walk = Literal["power", "push"]


def setting(default: _T, doc: str) -> _T:
    """A settings field: its default and its one-line description (shown in the docs table and CLI help)."""
    return field(default=default, metadata={"doc": doc})


def doc_of(f: Field[object]) -> str:
    return str(f.metadata.get("doc", ""))


@dataclass(frozen=True)
class PoolRule:
    """How a ranking over a full pool is arranged so that summaries and aggregates never push out the passages
    (:mod:`sirerag.retrievers.pool_rank`). These defaults serve every retriever but PPR, whose own are
    :attr:`PPRSettings.pool`."""

    pool_rule: PoolMode = setting("passages", "`passages`: the pool rule arranges the ranking; `native`: the "
                                              "retriever's own ranking")
    leaf_share: float = setting(0.9, "least share of leaves at every prefix of the ranking")
    lift_ratio: float = setting(0.0, "a summary or aggregate held back by the leaf share that scores this many times "
                                     "the next leaf places its best unranked passage first (0: off)")
    anchor: bool = setting(True, "a summary or aggregate waits until one of its passages is ranked")
    drop_covered: bool = setting(True, "an entry whose passages are all ranked already is dropped")
    pool_depth: int = setting(200, "entries taken from the retriever per query (at least 4 x k)")

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """The pool options every retriever takes: the field names."""
        return tuple(f.name for f in fields(cls))

    def validate(self) -> "PoolRule":
        check_types(self)  # leaf_share="x" is refused here, before float() below
        check(0.0 <= float(self.leaf_share) <= 1.0, "leaf_share", self.leaf_share, "a number in [0, 1]")
        check(float(self.lift_ratio) == 0.0 or float(self.lift_ratio) >= 1.0, "lift_ratio", self.lift_ratio,
              "0 (off) or a number >= 1")
        check(self.pool_depth >= 1, "pool_depth", self.pool_depth, "a positive integer")
        return self


@dataclass(frozen=True)
class BridgeSettings:
    """How far and how wide query-conditioned bridging through propositions goes (:mod:`sirerag.graph.bridging`,
    ``ner`` linking; ``hops`` 0 turns it off). The defaults were measured on the three bench corpora
    (docs/experiments/2026-11-25-bridging-through-propositions-the-defaults.md). As options of a PPR search
    each is named ``bridge_<field>``."""

    hops: int = setting(2, "bridging hops from a seed entity through its propositions (0: off)")
    top: int = setting(3, "propositions followed per hop, best first")
    threshold: float = setting(0.0, "least cosine of a proposition to the query to be followed")
    weight: float = setting(0.5, "reset weight of a bridged entity, relative to its seed")
    max_seeds: int = setting(1, "questions that link at most this many seed entities bridge fully (0: any number)")
    seed_weight: float = setting(0.3, "a question with more seeds bridges one hop from each, through its best "
                                      "proposition, at this share of the weight (0: it does not bridge)")
    titles: bool = setting(True, "bridge through the passage a title entity titles")
    specificity: float = setting(0.5, "exponent of a bridged entity's specificity (1 / its passage count) in its "
                                      "weight")
    title_passages: float = setting(1.0, "a bridged entity that titles a passage puts this many times its weight on "
                                         "that passage (0: none)")
    synonym_titles: float = setting(0.3, "a bridged entity that titles none gives this x cosine to the passage its "
                                         "closest synonym titles (0: off)")
    chain: bool = setting(False, "hop by hop: each hop after the first is scored by what is left of the question "
                                 "(its words without the linked names' and those the propositions followed "
                                 "matched); a branch with nothing left stops")
    chain_words: bool = setting(True, "`chain`: a further hop follows only a proposition that shares a word with "
                                      "what is left")
    chain_decay: bool = setting(True, "`chain`: a bridged entity's weight is capped by its parent's (false: by its "
                                      "seed's, so a deep hop is not weakened by the hops before it)")
    residual: float = setting(0.0, "the passage naming a bridged entity that best matches what is left of the "
                                   "question (its words without the linked names' and those the bridging "
                                   "propositions matched) gets this many times the entity's reset weight (0: off)")
    residual_by: ResidualBy = setting("rest", "`residual`: score the passages by what is left of the question "
                                              "(`rest`, one more query encoding) or by the whole question "
                                              "(`question`)")
    residual_seeds: bool = setting(False, "`residual`: the seeds' passages compete too, not only the bridged "
                                          "entities'")
    residual_words: bool = setting(False, "`residual`: a passage is picked only if it shares a word with what is "
                                          "left of the question (as `chain_words`)")
    residual_propositions: bool = setting(False, "`residual`: a passage scores as its best proposition instead of "
                                                 "its best leaf")
    residual_top: int = setting(0, "`residual`: only the best passages of this many entities of a question get "
                                   "weight, those with the largest reset weight x cosine (0: every entity's)")

    @classmethod
    def from_options(cls, **options: Any) -> "BridgeSettings":  # Any: values of several types, validated
        """Settings from field values (None or absent: the default), validated."""
        return cls(**{k: v for k, v in options.items() if v is not None}).validate()

    def validate(self) -> "BridgeSettings":
        check_types(self, "bridge_")
        check(0 <= self.hops <= 3, "bridge_hops", self.hops, "an integer from 0 to 3")
        check(self.top >= 1, "bridge_top", self.top, "an integer >= 1")
        check(-1.0 <= self.threshold <= 1.0, "bridge_threshold", self.threshold, "a number in [-1, 1]")
        check(self.weight > 0, "bridge_weight", self.weight, "a number > 0")
        check(self.max_seeds >= 0, "bridge_max_seeds", self.max_seeds, "an integer >= 0 (0: any number of seeds)")
        check(0.0 <= self.seed_weight <= 1.0, "bridge_seed_weight", self.seed_weight,
              "a number in [0, 1] (0: questions with more seeds than bridge_max_seeds do not bridge)")
        check(0.0 <= self.specificity <= 1.0, "bridge_specificity", self.specificity, "a number in [0, 1]")
        check(self.title_passages >= 0.0, "bridge_title_passages", self.title_passages,
              "a number >= 0 (0: a bridged entity's passages get no reset weight of their own)")
        check(self.residual >= 0.0, "bridge_residual", self.residual,
              "a number >= 0 (0: no passage gets weight for what is left of the question)")
        check(self.residual_top >= 0, "bridge_residual_top", self.residual_top, "an integer >= 0 (0: every entity)")
        check(0.0 <= self.synonym_titles <= 1.0, "bridge_synonym_titles", self.synonym_titles,
              "a number in [0, 1] (0: only the passages a bridged entity titles itself)")
        return self


#: the pool rule of the PPR retriever: chosen on the three bench corpora
#: (docs/experiments/2026-11-24-measurements-on-the-three-bench-corpora.md and
#: docs/experiments/2026-11-27-lifting-the-passage-an-aggregate-brings.md)
PPR_POOL = PoolRule(leaf_share=0.8, lift_ratio=5.0)
#: option-name prefix of the bridge settings (``bridge_hops``...)
BRIDGE_PREFIX = "bridge_"


@dataclass(frozen=True)
class PPRSettings:
    """Every setting of the Personalized PageRank retriever (docs/ppr.md), the default retriever."""

    linking: Linking = setting("ner", "query linking: `ner` (surface matches, then the entity tagger's entities "
                                      "to nodes) or `fact` (HippoRAG 2's query-to-fact)")
    passage_weight: float = setting(0.05, "weight of the passage seeds in the reset vector")
    passage_seeds: PassageSeeds = setting("dense+bm25", "passage seed scores: `dense`, or `dense+bm25` (both "
                                                        "min-max normalised and mixed)")
    bm25_share: float = setting(0.5, "BM25's share of the passage seed score (`dense+bm25`)")
    surface: bool = setting(True, "`ner`: link the longest surface-form matches of entity names first")
    top_facts: int = setting(5, "`fact`: facts retrieved per query")
    top_entities: int = setting(5, "`fact`: entity seeds kept")
    damping: float | None = setting(None, "PageRank: probability of following an edge (none: the graph's "
                                          "`graph.damping`)")
    tol: float | None = setting(None, "PageRank: stop when the L1 change is below this (none: the graph's "
                                      "`graph.tol`)")
    max_iter: int | None = setting(None, "PageRank: iteration cap (none: the graph's `graph.max_iter`)")
    walk: Walk = setting("push", "PageRank: `push` (local push from the reset, to `push_tol`: a query's work does "
                                 "not grow with the graph) or `power` (power iteration over every node, to `tol`)")
    push_tol: float = setting(1e-6, "`push`: a node is pushed while its residual exceeds this times the reset's "
                                    "total times its number of edges")
    bridge: BridgeSettings = field(default_factory=BridgeSettings, metadata={"doc": "bridging settings"})
    pool: PoolRule = field(default_factory=lambda: PPR_POOL, metadata={"doc": "the pool rule"})

    def validate(self) -> "PPRSettings":
        check_types(self)
        check(self.passage_weight >= 0, "passage_weight", self.passage_weight, "a number >= 0")
        check(0.0 <= self.bm25_share <= 1.0, "bm25_share", self.bm25_share, "a number in [0, 1]")
        check(self.top_facts >= 1, "top_facts", self.top_facts, "an integer >= 1")
        check(self.top_entities >= 1, "top_entities", self.top_entities, "an integer >= 1")
        check(self.damping is None or 0.0 <= self.damping < 1.0, "damping", self.damping, "a number in [0, 1)")
        check(self.tol is None or self.tol > 0.0, "tol", self.tol, "a positive number")
        check(self.max_iter is None or self.max_iter >= 1, "max_iter", self.max_iter, "an integer >= 1")
        check(0.0 < self.push_tol < 1.0, "push_tol", self.push_tol, "a number in (0, 1)")
        self.bridge.validate()
        self.pool.validate()
        return self

    @staticmethod
    def option_names() -> tuple[str, ...]:
        """The search options these settings take, in field order: the retriever's own, ``bridge_<field>``, then
        the pool rule's (which every retriever takes)."""
        return tuple(name for name, _, _ in options())

    @classmethod
    def from_options(cls, **options: Any) -> "PPRSettings":  # Any: values of several types, validated
        """Settings from search options (None or absent: the default), validated.

        Raises:
            ConfigError: an unknown option (naming the valid ones), or a value of the wrong type or range.
        """
        return cls().with_options(**options)

    def with_options(self, **options: Any) -> "PPRSettings":  # Any: values of several types, validated
        """These settings with the given search options replaced (None: kept), validated.

        Raises:
            ConfigError: an unknown option, or a value of the wrong type or range.
        """
        options = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(options) - set(self.option_names()))
        if unknown:
            raise ConfigError(f"the ppr retriever does not take option(s) {unknown}; "
                              f"valid: {sorted(self.option_names())}")
        own = {f.name for f in fields(self) if f.name not in ("bridge", "pool")}
        bridge = {k[len(BRIDGE_PREFIX):]: v for k, v in options.items() if k.startswith(BRIDGE_PREFIX)}
        pool = {k: v for k, v in options.items() if k in PoolRule.option_names()}
        mine = {k: v for k, v in options.items() if k in own}
        return replace(self, **mine, bridge=replace(self.bridge, **bridge), pool=replace(self.pool, **pool)).validate()


def options(settings: PPRSettings | None = None) -> list[tuple[str, Field[object], object]]:
    """``(option name, field, value)`` of every search option of ``settings`` (default: :class:`PPRSettings`'s
    defaults), in the order of :meth:`PPRSettings.option_names`."""
    settings = settings or PPRSettings()
    out: list[tuple[str, Field[object], object]] = []
    for f in fields(settings):
        value = getattr(settings, f.name)
        if f.name == "bridge":
            out += [(BRIDGE_PREFIX + g.name, g, getattr(value, g.name)) for g in fields(value)]
        elif f.name == "pool":
            out += [(g.name, g, getattr(value, g.name)) for g in fields(value)]
        else:
            out.append((f.name, f, value))
    return out


def choices(f: Field[object]) -> tuple[object, ...] | None:
    """The values a ``Literal`` field allows, else None."""
    hint = typing.get_type_hints(_owner(f))[f.name]
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else None


def kind(f: Field[object]) -> str:
    """What a field takes, for the docs table (``a number``, ``one of 'ner', 'fact'``...)."""
    return describe(typing.get_type_hints(_owner(f))[f.name])


def _owner(f: Field[object]) -> type:
    for cls in (PPRSettings, BridgeSettings, PoolRule):
        if any(g is f for g in fields(cls)):
            return cls
    raise ValueError(f"{f.name} is no settings field")


def _shown(value: Any) -> str:
    if value is None:
        return "the graph's"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"`{value}`" if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)


def settings_table() -> str:
    """The Markdown table of every PPR search option (docs/ppr.md, "Settings"): option, default, what it
    takes and what it does; the pool rule's row shows the PPR default and the other retrievers' where they
    differ."""
    others = PoolRule()
    rows = ["| option | default | takes | what it does |", "| --- | --- | --- | --- |"]
    for name, f, value in options():
        default = _shown(value)
        if name in PoolRule.option_names() and getattr(others, name) != value:
            default += f" (other retrievers: {_shown(getattr(others, name))})"
        rows.append(f"| `{name}` | {default} | {kind(f)} | {doc_of(f)} |")
    return "\n".join(rows) + "\n"


__all__ = ["BRIDGE_PREFIX", "BridgeSettings", "PPRSettings", "PPR_POOL", "PoolRule", "choices", "doc_of", "kind",
           "options", "settings_table"]
