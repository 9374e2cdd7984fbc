"""``ragshield scan``: the product users run first — red-team one's own index on a copy.

``run`` drives the scan (settings × chains through the one executor), ``questions`` is the
one question type and reader, ``question_writer`` / ``writer`` write questions and attack
texts with the LLM, ``extraction`` measures leakage, ``gate`` / ``tags`` judge the cells,
``report`` / ``formats`` / ``sarif`` / ``junit`` write the files, ``cli`` is the command.
"""
