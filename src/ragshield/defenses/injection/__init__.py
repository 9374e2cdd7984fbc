"""Prompt-injection defenses (issue #23): a sentence/window-level input filter and an
output-side check, one idea per module.

Example::

    from ragshield.defenses.injection import InjectionGuard, OutputInstructionCheck

Modules: :mod:`.text` (normalisation and decoding of obfuscated text), :mod:`.rules`
(deterministic must-never-pass constructs), :mod:`.head` (the classifier head on sentence
vectors), :mod:`.detector` (``InjectionGuard``, the ``injection-guard`` filter),
:mod:`.calibration` (per-index thresholds recorded in ``meta.json``), :mod:`.output`
(``injection-output``, the generator wrapper).
"""

from __future__ import annotations

from ragshield.defenses.injection.calibration import (
    calibrate_defenses,
    calibrate_index,
    calibrate_injection,
)
from ragshield.defenses.injection.detector import InjectionGuard
from ragshield.defenses.injection.head import InjectionHead
from ragshield.defenses.injection.output import OutputInstructionCheck, followed

__all__ = [
    "InjectionGuard",
    "InjectionHead",
    "OutputInstructionCheck",
    "calibrate_defenses",
    "calibrate_index",
    "calibrate_injection",
    "followed",
]
