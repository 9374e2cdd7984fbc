"""What each (setting, chain) cell of a scan costs: engine counts and process CPU seconds.

Example::

    cost = CellCost()                       # before the cells run
    cost.charge("poisonedrag / ragdefender")  # from each question's callback
    cost.cells["poisonedrag / ragdefender"]  # {"rows": ..., "requested": ..., "cpu_s": ...}
"""

from __future__ import annotations

import time

from ragshield.generate import counters


class CellCost:
    """The engine counts (:mod:`ragshield.generate.counters`) and process CPU seconds of
    each (setting, chain) cell, keyed ``"setting / chain"``.

    Why: the answering stage is one number in the stage table, but what a user would drop
    to make a scan at size shorter is a setting or a chain; this says what each costs.
    Everything counted since the previous question's callback is charged to the question
    reported next: a cell's answers are computed before its questions are reported, so a
    setting's planting and search count to its first chain, and a cell whose prompts an
    earlier cell already answered shows answer-cache hits, not rows."""

    def __init__(self) -> None:
        self.cells: dict[str, dict[str, float]] = {}
        self._n0, self._c0 = counters.snapshot(), time.process_time()

    def charge(self, cell: str) -> None:
        moved: dict[str, float] = dict(counters.since(self._n0))
        moved["cpu_s"] = time.process_time() - self._c0
        self._n0, self._c0 = counters.snapshot(), time.process_time()
        into = self.cells.setdefault(cell, {})
        for k, v in moved.items():
            into[k] = into.get(k, 0) + v
