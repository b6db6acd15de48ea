"""How far and how wide query-conditioned bridging goes (:mod:`sirerag.graph.bridging`), validated."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sirerag.core.errors import check


@dataclass(frozen=True)
class BridgeSettings:
    """How far and how wide bridging goes (``hops`` 0 turns it off). The defaults were measured on the three
    bench corpora (docs/ppr.md, "Bridging through propositions"): two hops, the three best propositions per
    hop, half the weight, from questions that link one seed entity; a question that links more bridges one hop
    from each seed on its own, through its best proposition, at ``seed_weight`` (0.3) of that weight. A bridged
    entity that titles a passage puts ``title_passages`` (1) times its weight on that passage too, and one that
    titles none gives ``synonym_titles`` (0.3) x cosine of it to the passage its closest synonym titles."""

    hops: int = 2
    top: int = 3
    threshold: float = 0.0
    weight: float = 0.5
    max_seeds: int = 1
    seed_weight: float = 0.3
    titles: bool = True
    specificity: float = 0.5
    title_passages: float = 1.0
    synonym_titles: float = 0.3

    @classmethod
    def from_options(cls, hops: int | None = None, top: int | None = None, threshold: float | None = None,
                     weight: float | None = None, max_seeds: int | None = None,
                     seed_weight: float | None = None, titles: bool | None = None,
                     specificity: float | None = None, title_passages: float | None = None,
                     synonym_titles: float | None = None) -> "BridgeSettings":
        """Settings from retriever options (None: the default), validated."""
        given: dict[str, Any]
        given = {"hops": hops, "top": top, "threshold": threshold, "weight": weight, "max_seeds": max_seeds,
                 "seed_weight": seed_weight, "titles": titles, "specificity": specificity,
                 "title_passages": title_passages, "synonym_titles": synonym_titles}
        settings = cls(**{k: v for k, v in given.items() if v is not None})
        settings.validate()
        return settings

    def validate(self) -> None:
        check(isinstance(self.hops, int) and not isinstance(self.hops, bool) and 0 <= self.hops <= 3,
              "bridge_hops", self.hops, "an integer from 0 to 3")
        check(isinstance(self.top, int) and not isinstance(self.top, bool) and self.top >= 1,
              "bridge_top", self.top, "an integer >= 1")
        check(isinstance(self.threshold, (int, float)) and -1.0 <= self.threshold <= 1.0,
              "bridge_threshold", self.threshold, "a number in [-1, 1]")
        check(isinstance(self.weight, (int, float)) and self.weight > 0, "bridge_weight", self.weight,
              "a number > 0")
        check(isinstance(self.max_seeds, int) and not isinstance(self.max_seeds, bool) and self.max_seeds >= 0,
              "bridge_max_seeds", self.max_seeds, "an integer >= 0 (0: any number of seeds)")
        check(isinstance(self.seed_weight, (int, float)) and not isinstance(self.seed_weight, bool)
              and 0.0 <= self.seed_weight <= 1.0, "bridge_seed_weight", self.seed_weight,
              "a number in [0, 1] (0: questions with more seeds than bridge_max_seeds do not bridge)")
        check(isinstance(self.titles, bool), "bridge_titles", self.titles, "true or false")
        check(isinstance(self.specificity, (int, float)) and not isinstance(self.specificity, bool)
              and 0.0 <= self.specificity <= 1.0, "bridge_specificity", self.specificity, "a number in [0, 1]")
        check(isinstance(self.title_passages, (int, float)) and not isinstance(self.title_passages, bool)
              and self.title_passages >= 0.0, "bridge_title_passages", self.title_passages,
              "a number >= 0 (0: a bridged entity's passages get no reset weight of their own)")
        check(isinstance(self.synonym_titles, (int, float)) and not isinstance(self.synonym_titles, bool)
              and 0.0 <= self.synonym_titles <= 1.0, "bridge_synonym_titles", self.synonym_titles,
              "a number in [0, 1] (0: only the passages a bridged entity titles itself)")


__all__ = ["BridgeSettings"]
