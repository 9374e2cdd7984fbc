"""RAGDefender (Kim, Lee, Koo, ACSAC 2025): the paper's filter and ragshield's hardened one.

One paper, one package: the paper's math (:mod:`.math`), the faithful class (:mod:`.paper`),
the attack evidence (:mod:`.evidence`), the question echo (:mod:`.echo`), what passages
claim (:mod:`.claims`) and the improved filter (:mod:`.filter`). The public names are
re-exported here so ``from ragshield.defenses.ragdefender import RAGDefender`` keeps working.
"""

from ragshield.defenses.ragdefender.filter import (
    ClusteringEstimate,
    ConcentrationEstimate,
    PairScores,
    PaperRAGDefender,
    RAGDefender,
    TermEvidence,
    calibrate_guard,
    char_trigram_cosine,
    clustering_estimate,
    concentration_estimate,
    content_words,
    cosine_matrix,
    dense_groups,
    frequency_scores,
    group_signature,
    largest_gap_ratio,
    n_adv_from_clusters,
    n_pairs_for,
    oov_rate,
    outlier_to_spare,
    restates_question,
    tfidf_top_terms,
    top_n_by_score,
    trigram_cosine_matrix,
    typo_copies,
)

__all__ = [
    "ClusteringEstimate", "ConcentrationEstimate", "PairScores", "PaperRAGDefender",
    "RAGDefender", "TermEvidence", "calibrate_guard", "char_trigram_cosine",
    "clustering_estimate", "concentration_estimate", "content_words", "cosine_matrix",
    "dense_groups", "frequency_scores", "group_signature", "largest_gap_ratio",
    "n_adv_from_clusters", "n_pairs_for", "oov_rate", "outlier_to_spare",
    "restates_question", "tfidf_top_terms", "top_n_by_score", "trigram_cosine_matrix",
    "typo_copies",
]  # fmt: skip
