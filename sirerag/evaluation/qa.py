"""Question answering over retrieved entries: the reader, EM/F1, TPQ and TPER.

The reader follows SiReRAG's protocol: the top 20 retrieved pool entries (or
entries in rank order up to a token budget) are given as context with the
question and the instruction to answer in as few words as possible
(:data:`~sirerag.llm.prompts.QA_READER`). Answers are scored with SQuAD's exact
match and token F1 after SQuAD normalisation, taking the best score over the
gold answer and its aliases, and reported as means over questions (0..1).

Efficiency follows the paper: TPQ is the average seconds per query (retrieval +
reading, each query timed on its own), and TPER compares two indexes A and B as
``(time_A / time_B) / (pool_A / pool_B)``; below 1 means inference time grows
more slowly than the pool.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from sirerag.core.errors import check
from sirerag.evaluation.retrieval import ContextBuilder, Question
from sirerag.evaluation.text import normalize_answer, overlap_f1
from sirerag.llm.base import LLM, Completion, LLMCallError, LLMRequest
from sirerag.llm.prompts import QA_READER
from sirerag.core.types import Pool

if TYPE_CHECKING:
    from sirerag.pool.loaded import LoadedIndex
    from sirerag.retrievers.base import Retriever

logger = logging.getLogger(__name__)

#: Entries retrieved per question when a token budget (not a count) limits the context.
BUDGET_DEPTH = 200


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(a) for a in answers))


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    """Best SQuAD token F1 of the prediction against any of the answers."""
    pred_tokens = normalize_answer(prediction).split()
    return max((overlap_f1(pred_tokens, normalize_answer(a).split()) for a in answers), default=0.0)


def clean_answer(text: str) -> str:
    """The first non-empty line of a reply, without an ``Answer:`` prefix."""
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            if line.lower().startswith("answer:"):
                line = line[len("answer:"):].strip()
            return line
    return ""


def reader_request(question: str, context: str, *, max_tokens: int = 32) -> LLMRequest:
    """The reader's request for one question and its context."""
    return QA_READER.request(max_tokens=max_tokens, context=context, question=question)


def tper(tpq_a: float, pool_a: int, tpq_b: float, pool_b: int) -> float:
    """Time-pool efficiency ratio of method A against baseline B: ``(tA/tB) / (poolA/poolB)``."""
    check(tpq_b > 0 and pool_a > 0 and pool_b > 0, "tper inputs", (tpq_a, pool_a, tpq_b, pool_b),
          "a positive baseline time and positive pool sizes")
    return (tpq_a / tpq_b) / (pool_a / pool_b)


@dataclass(frozen=True)
class Prediction:
    """One question read by the reader: its answer, the gold answers and the scores
    (``error``: why the reader failed, the answer then scores 0)."""

    id: str | None
    question: str
    prediction: str
    answers: tuple[str, ...]
    em: float
    f1: float
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        row = {"id": self.id, "question": self.question, "prediction": self.prediction,
               "answers": list(self.answers), "em": self.em, "f1": self.f1}
        return {**row, "error": self.error} if self.error else row


@dataclass(frozen=True)
class ReaderResult:
    """What :func:`evaluate_reader` measured; :meth:`to_dict` is its JSON form (``top_k``
    or ``token_budget``, whichever chose the context)."""

    reader: str
    n_questions: int
    em: float
    f1: float
    tpq: float
    retrieval_seconds: float
    reading_seconds: float
    n_failed: int
    n_cached: int
    context_tokens: float
    pool_size: int
    predictions: tuple[Prediction, ...]
    top_k: int | None = None
    token_budget: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("top_k", "token_budget")}
        out["predictions"] = [p.to_dict() for p in self.predictions]
        if self.token_budget is not None:
            out["token_budget"] = self.token_budget
        else:
            out["top_k"] = self.top_k
        return out


@dataclass(frozen=True)
class Efficiency:
    """TPQ and pool size of result A and baseline B, and A's TPER against B."""

    tpq_a: float
    tpq_b: float
    pool_a: int
    pool_b: int
    tper: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _field(question: Question | Mapping[str, Any], name: str) -> Any:
    return question[name] if isinstance(question, Mapping) else getattr(question, name)


def evaluate_reader(
    index: LoadedIndex | Pool,
    retriever: Retriever,
    questions: Sequence[Question | Mapping[str, Any]],
    llm: LLM,
    *,
    top_k: int = 20,
    token_budget: int | None = None,
    max_tokens: int = 32,
    concurrency: int = 1,
    show_progress: bool = True,
) -> ReaderResult:
    """Answer each question from retrieved entries and score the answers.

    Args:
        index: a loaded index (``.pool``) or a :class:`~sirerag.core.types.Pool`.
        retriever: any :class:`~sirerag.retrievers.base.Retriever` over that pool.
        questions: :class:`~sirerag.evaluation.retrieval.Question` records, or mappings with ``question``,
            ``answers`` (gold and aliases) and optionally ``id``.
        llm: the reader.
        top_k: entries given as context (the paper uses 20); ignored with ``token_budget``.
        token_budget: instead of ``top_k``, entries in rank order up to this many tokens
            (the last one cut at the budget).
        max_tokens: completion budget of an answer.
        concurrency: questions read at once; 1 (the default) times each query alone,
            which is what TPQ means.
        show_progress: show a progress bar.

    Returns:
        A :class:`ReaderResult`: ``em``, ``f1`` (means in 0..1), ``tpq`` (seconds per query),
        ``retrieval_seconds`` and ``reading_seconds`` (means), ``n_questions``, ``n_failed``
        (reader failures, scored 0), ``n_cached`` (answers served by the call cache: their
        time is not a model's), ``context_tokens`` (mean), ``pool_size``, ``reader``, ``top_k``
        or ``token_budget``, and ``predictions`` (one :class:`Prediction` per question).

    Raises:
        ConfigError: a setting is out of range.
    """
    from tqdm.auto import tqdm

    check(isinstance(top_k, int) and top_k >= 1, "top_k", top_k, "an integer >= 1")
    check(token_budget is None or (isinstance(token_budget, int) and token_budget >= 1), "token_budget",
          token_budget, "None or an integer >= 1")
    check(isinstance(concurrency, int) and concurrency >= 1, "concurrency", concurrency, "an integer >= 1")
    pool = index if isinstance(index, Pool) else index.pool
    builder = ContextBuilder(pool)
    depth = top_k if token_budget is None else BUDGET_DEPTH

    texts = [str(_field(q, "question")) for q in questions]
    contexts: list[str] = []
    retrieval_times: list[float] = []
    for text in tqdm(texts, desc="retrieve", unit="q", disable=not show_progress):
        start = time.perf_counter()
        hits = retriever.search(text, k=depth)
        retrieval_times.append(time.perf_counter() - start)
        if token_budget is None:
            contexts.append("\n\n".join(pool.get(h.entry_id).text for h in hits[:top_k]))
        else:
            contexts.append(builder.context(hits, token_budget))

    requests = [reader_request(q, c, max_tokens=max_tokens) for q, c in zip(texts, contexts)]

    def read(request: LLMRequest) -> tuple[Completion | LLMCallError, float]:
        start = time.perf_counter()
        try:
            result: Completion | LLMCallError = llm.complete(request)
        except LLMCallError as exc:
            result = exc
        return result, time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=concurrency) as pool_exec:
        answered = list(tqdm(pool_exec.map(read, requests), total=len(requests), desc="read", unit="q",
                             disable=not show_progress))

    predictions: list[Prediction] = []
    n_failed = n_cached = 0
    for q, text, (result, _elapsed) in zip(questions, texts, answered):
        answers = [str(a) for a in _field(q, "answers")]
        if isinstance(result, Completion):
            n_cached += int(result.cached)
            prediction = clean_answer(result.text)
            error = None
        else:
            n_failed += 1
            prediction, error = "", str(result)
        qid = q.get("id") if isinstance(q, Mapping) else getattr(q, "id", None)
        predictions.append(Prediction(qid, text, prediction, tuple(answers), exact_match(prediction, answers),
                                      f1_score(prediction, answers), error))
    if n_failed:
        logger.warning("%d of %d questions could not be answered by %s; they score 0", n_failed, len(texts),
                       llm.spec)
    if n_cached:
        logger.warning("%d of %d answers came from the call cache: TPQ does not measure the reader for them",
                       n_cached, len(texts))
    n = max(len(texts), 1)
    reading_times = [elapsed for _result, elapsed in answered]
    return ReaderResult(
        reader=llm.spec,
        n_questions=len(texts),
        em=sum(p.em for p in predictions) / n,
        f1=sum(p.f1 for p in predictions) / n,
        tpq=(sum(retrieval_times) + sum(reading_times)) / n,
        retrieval_seconds=sum(retrieval_times) / n,
        reading_seconds=sum(reading_times) / n,
        n_failed=n_failed,
        n_cached=n_cached,
        context_tokens=sum(len(builder.enc.encode(c, disallowed_special=())) for c in contexts) / n,
        pool_size=len(pool),
        predictions=tuple(predictions),
        top_k=None if token_budget is not None else top_k,
        token_budget=token_budget,
    )


def efficiency(result_a: ReaderResult, result_b: ReaderResult) -> Efficiency:
    """TPER of result A (e.g. SiReRAG) against baseline B (e.g. RAPTOR), from two
    :func:`evaluate_reader` results on the same questions."""
    return Efficiency(tpq_a=result_a.tpq, tpq_b=result_b.tpq, pool_a=result_a.pool_size, pool_b=result_b.pool_size,
                      tper=tper(result_a.tpq, result_a.pool_size, result_b.tpq, result_b.pool_size))
