"""Trees: the similarity tree (RAPTOR) and the relatedness tree (proposition aggregates)."""
