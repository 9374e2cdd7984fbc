"""OWASP LLM Top-10 2025 and MITRE ATLAS ids for every scan setting.

Example::

    from ragshield.scan.tags import tags_for

    tags_for("mixed-4x").owasp   # ('LLM04:2025', 'LLM08:2025', 'LLM09:2025')

Why a table keyed by *group*: users file findings by these ids (PyRIT#2085,
giskard-oss#2454), and a setting added later (``poisonedrag-3``, an ``adaptive-*``
setting) must be tagged without anyone remembering to. A setting's group is its name up to
the first ``-`` (``injection-hijack`` → ``injection``); :data:`SETTING_TAGS` overrides a
group for one setting. A setting in no known group gets the generic RAG-poisoning tags and
``known=False``, so every output still carries ids and a test catches the omission.

Sources: OWASP Top 10 for LLM Applications 2025 (LLM01 Prompt Injection, LLM02 Sensitive
Information Disclosure, LLM04 Data and Model Poisoning, LLM08 Vector and Embedding
Weaknesses, LLM09 Misinformation); MITRE ATLAS techniques AML.T0070 RAG Poisoning,
AML.T0051.001 LLM Prompt Injection: Indirect, AML.T0043 Craft Adversarial Data,
AML.T0057 LLM Data Leakage.
"""

from __future__ import annotations

from dataclasses import dataclass

OWASP_NAMES = {
    "LLM01:2025": "Prompt Injection",
    "LLM02:2025": "Sensitive Information Disclosure",
    "LLM04:2025": "Data and Model Poisoning",
    "LLM08:2025": "Vector and Embedding Weaknesses",
    "LLM09:2025": "Misinformation",
}
ATLAS_NAMES = {
    "AML.T0070": "RAG Poisoning",
    "AML.T0051.001": "LLM Prompt Injection: Indirect",
    "AML.T0043": "Craft Adversarial Data",
    "AML.T0057": "LLM Data Leakage",
}


@dataclass(frozen=True)
class Tags:
    """The ids of one setting; ``known`` is False for a setting tagged by the fallback."""

    owasp: tuple[str, ...]
    atlas: tuple[str, ...]
    description: str
    known: bool = True

    def to_dict(self) -> dict[str, object]:
        return {"owasp": list(self.owasp), "atlas": list(self.atlas)}

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.owasp, *self.atlas)


_POISONING = Tags(
    ("LLM04:2025", "LLM08:2025", "LLM09:2025"),
    ("AML.T0070",),
    "misinformation passages planted into the index to make the answer name a target",
)
#: Tags per setting group (name up to the first '-').
GROUP_TAGS: dict[str, Tags] = {
    "clean": Tags((), (), "no attack: what each defense costs on normal traffic"),
    "poisonedrag": _POISONING,
    "mixed": _POISONING,
    "injection": Tags(
        ("LLM01:2025", "LLM04:2025", "LLM08:2025"),
        ("AML.T0051.001", "AML.T0070"),
        "passages carrying an instruction for the generator (indirect prompt injection)",
    ),
    "suffix": Tags(
        ("LLM01:2025", "LLM04:2025", "LLM08:2025"),
        ("AML.T0070", "AML.T0043"),
        "a poisoned passage with an optimised adversarial suffix (GCG)",
    ),
    "extraction": Tags(
        ("LLM02:2025", "LLM08:2025"),
        ("AML.T0057",),
        "black-box queries that make the pipeline reveal indexed chunks verbatim",
    ),
    "adaptive": Tags(
        ("LLM04:2025", "LLM01:2025", "LLM08:2025", "LLM09:2025"),
        ("AML.T0070", "AML.T0043"),
        "attack texts written against the defenses themselves (an attacker who read them)",
    ),
}
#: One setting whose tags differ from its group's.
SETTING_TAGS: dict[str, Tags] = {
    "poisonedrag-whitebox": Tags(
        ("LLM04:2025", "LLM08:2025", "LLM09:2025"),
        ("AML.T0070", "AML.T0043"),
        "PoisonedRAG passages with HotFlip prefixes optimised against the index's encoder",
    ),
}


def group_of(setting: str) -> str:
    """The setting's group in the attack-settings table (:mod:`ragshield.attacks.settings`),
    else its name up to the first ``-`` (a setting the table does not know yet)."""
    from ragshield.attacks import settings as table

    if table.known(setting):
        group = table.group_of(setting)
        if group in GROUP_TAGS:
            return group
    return setting.split("-", 1)[0]


def tags_for(setting: str) -> Tags:
    """The setting's own tags, else its group's, else the generic poisoning tags."""
    if setting in SETTING_TAGS:
        return SETTING_TAGS[setting]
    group = GROUP_TAGS.get(group_of(setting))
    if group is not None:
        return group
    return Tags(_POISONING.owasp, _POISONING.atlas, "attack texts planted into the index", False)
