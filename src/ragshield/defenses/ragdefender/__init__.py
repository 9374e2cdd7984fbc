"""RAGDefender (Kim, Lee, Koo, ACSAC 2025): the paper's filter and ragshield's hardened one.

One paper, one package: the paper's math (:mod:`.math`), the faithful class (:mod:`.paper`),
the attack evidence (:mod:`.evidence`), the question echo (:mod:`.echo`), what passages
claim (:mod:`.claims`) and the improved filter (:mod:`.filter`). The public names are
re-exported here so ``from ragshield.defenses.ragdefender import RAGDefender`` keeps working.
"""

# one list of public names, filter.py's: this package re-exports exactly what it exports
from ragshield.defenses.ragdefender.filter import *  # noqa: F403
from ragshield.defenses.ragdefender.filter import __all__ as __all__
