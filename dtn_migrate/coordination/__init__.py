"""The one place that talks to the coordination backends: the TaskFlow
jobboard that active/active engines share (:mod:`.jobboard`, drivers
loaded through stevedore) and the conductor that claims its jobs
(:mod:`.conductor`).  The engine decides what a job does; this package
knows nothing of migrations.
"""
