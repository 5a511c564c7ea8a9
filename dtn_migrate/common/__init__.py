"""The vocabulary every part of dtn-migrate shares: the states and stages
of migrations, transfers, imports, protection policies and drills
(:mod:`.states`), how sizes, rates and durations read
(:mod:`.units`), and the one poll loop (:mod:`.polling`).

These modules import nothing of dtn-migrate and nothing outside the
standard library but tenacity (the poll loop's), so that the client
side (``client/``, ``osc/``, ``dashboard/``) and the libraries
(``transfer/``, ``staging/``) can use them without pulling in the
engine or the agent.
"""
