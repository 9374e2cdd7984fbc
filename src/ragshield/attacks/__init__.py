"""Attacks on a RAG pipeline, by name (:mod:`ragshield.attacks.registry`).

How a harness (``ragshield scan``, the evaluations) uses them on any corpus::

    from ragshield.attacks.registry import available, build_attack
    from ragshield.attacks.targets import TargetAnswerWriter
    from ragshield.scan.question_writer import QuestionWriter
    from ragshield.scan.questions import read_questions

    questions = read_questions(path) or QuestionWriter().generate(passages, n=20)
    target = TargetAnswerWriter().target_for(q.question, q.answers, given=q.target_answer)
    for name in available("corpus"):
        attack = build_attack(name)                      # LLM-backed ones: generator=...
        if name == "garag-typos":                        # perturbs an existing passage
            texts = attack.craft_from(q.question, gold_or_top1_text, n, seed=s,
                                      answers=q.answers)
        else:
            texts = attack.craft(q.question, target.target, n, seed=s)
        # plant `texts` into a COPY of the index, retrieve for real, score.

In-place variants (a genuine passage edited by the attacker):
``build_attack("injection-question").insert_into(passage_text, question, target, seed=s)``
(also ``injection-offtopic``, ``suffix-offtopic``, ``suffix-question``).

Provenance: the LLM-written attacks (``poisonedrag-blackbox``, ``poisonedrag-whitebox``,
``misleading``) expose ``generated_by`` (``"llm:<generator>"`` or ``"template"``) and
``craft_passages(...)`` returning per-passage records with the generator time; they may
return fewer than ``n`` passages (never padded), so report the number actually planted.
"""
