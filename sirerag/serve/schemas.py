"""The bodies the server takes and gives (pydantic models: FastAPI checks requests against them and shows them in
the OpenAPI schema). Types are strict (``"k": "5"`` is refused, not read as 5); the bounds of a request are
checked by the routes (:func:`sirerag.serve.indexes.check_queries`), with the library's messages."""
from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from sirerag.answers import DEFAULT_ANSWER_TOKENS, DEFAULT_TOKEN_BUDGET

OptionValue = Union[str, bool, int, float]

_INDEX = "the index's name (GET /indexes); may be left out when the server serves one index"
_RETRIEVER = ("dense, bm25, ppr or a fusion such as dense+bm25 (default: ppr when the index has a graph that "
              "links passages, else dense)")
_OPTIONS = ("retriever and pool-rule options, as sirerag.Index.search: linking, passage_weight, fusion, pool_rule, "
            "leaf_share, lift_ratio")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SearchRequest(_Strict):
    """One query (``query``) or a batch (``queries``), searched on one commit of the index."""

    index: Optional[str] = Field(None, description=_INDEX)
    query: Optional[str] = Field(None, description="one query (or give queries)")
    queries: Optional[list[str]] = Field(None, description="a batch of queries (or give query)")
    k: int = Field(10, description="entries per query (at most serve.max_k)")
    retriever: Optional[str] = Field(None, description=_RETRIEVER)
    options: dict[str, OptionValue] = Field(default_factory=dict, description=_OPTIONS)


class AskRequest(_Strict):
    """A question answered by the server's reader (``sirerag serve --llm``) from the ``k`` best entries."""

    index: Optional[str] = Field(None, description=_INDEX)
    question: str
    k: int = Field(10, description="entries retrieved (at most serve.max_k)")
    retriever: Optional[str] = Field(None, description=_RETRIEVER)
    options: dict[str, OptionValue] = Field(default_factory=dict, description=_OPTIONS)
    token_budget: int = Field(DEFAULT_TOKEN_BUDGET, description="context tokens read at most, in rank order")
    max_tokens: int = Field(DEFAULT_ANSWER_TOKENS, description="the answer's completion budget")


class Hit(BaseModel):
    """One ranked pool entry (:class:`sirerag.SearchResult`)."""

    rank: int
    id: str
    score: float
    title: str
    section: str
    tree: str
    kind: str
    level: int
    passages: list[str]
    text: str


class QueryHits(BaseModel):
    query: str
    hits: list[Hit]


class SearchResponse(BaseModel):
    """``commit`` names the one commit of the index every hit comes from."""

    index: str
    commit: str
    k: int
    ranking: dict[str, Any] = Field(description="retriever, pool_rule, leaf_share, lift_ratio")
    results: list[QueryHits] = Field(description="one per query, in order")


class AskResponse(BaseModel):
    index: str
    commit: str
    question: str
    answer: str
    llm: str
    context_tokens: int
    cached: bool
    sources: list[dict[str, Any]] = Field(description="the entries read, numbered from 1 in rank order")


class IndexInfo(BaseModel):
    name: str
    commit: str
    entries: int
    documents: Optional[int]
    trees: list[str]
    graph: bool
    embedder: Optional[str]


class Error(BaseModel):
    """Every error: one line, the message the command line prints."""

    error: str
