"""What a query may be, wherever one enters: ``sirerag search``/``ask``/``eval``, ``Index.search``/``search_many``/
``ask`` and the LangChain and llama-index retrievers. Not a build setting: an index does not record it."""
from __future__ import annotations

from dataclasses import dataclass

from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import check


@dataclass(frozen=True)
class QueryConfig:
    """``max_chars``: the longest query, in characters (after control characters are removed). 8,192
    characters is about 1,500 English words (some 2,000 cl100k tokens): a question, or a pasted paragraph or
    two, passes, while the embedders read only the first 256 (MiniLM) or 32 (ColBERT) tokens of a query anyway.
    It is counted in characters so that the check costs nothing and runs before any model or tokenizer loads."""

    max_chars: int = 8192

    def validate(self) -> "QueryConfig":
        check_types(self, "query")
        check(self.max_chars >= 1, "query.max_chars", self.max_chars, "a positive number of characters")
        return self
