"""The retrieval pool: flattening the trees into entries, saving and reading them with the
index's records (:mod:`.store`), the loaded index, one commit of an index directory (:mod:`.loaded`),
the pool's stored BM25 index (:mod:`.bm25`) and exports to other retrievers and vector stores
(:mod:`.export`)."""
