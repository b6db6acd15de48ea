"""The retrieval pool: flattening the trees into entries, saving and loading them with the
index's records (:mod:`.store`), the pool's stored BM25 index (:mod:`.bm25`) and exports to
other retrievers and vector stores (:mod:`.export`)."""
