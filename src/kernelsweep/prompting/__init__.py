"""Everything between a task and a candidate's code, on the model's side:

    strategies.py   a role + a method's flags -> the messages sent (the one code path)
    templates.py    prompts/*.md filled in ($name placeholders)
    distill.py      an evaluation put into words for the next prompt
    retrieval.py    BM25 search over corpus/*.md (the researcher, the react `docs` tool)
    extract.py      a response's raw text -> the candidate module

How messages reach a model (chat or plain transcript) is kernelsweep.models."""
