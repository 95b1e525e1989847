"""One evaluation's duties on the trusted side, a module each: correctness
(the first trials and their comparison), variants (the shape variants),
timing (blocks, windows, timed-output checks, slowdown blame), evidence (the
candidate's replies as flags: call signals, hooks, patches, launches, work
share), draws (secret seeds) and verdict (the category, a pure function of
typed evidence). evaluation.py runs them in order; none runs candidate code."""
