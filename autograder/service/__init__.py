"""Feedback on submit: a service that grades each new submission in nbgrader's exchange (:mod:`.service`), with
its queue on disk (:mod:`.queue`), its settings (:mod:`.settings`), its own course folder (:mod:`.workfolder`),
the race-free copy-in of an inbound entry (:mod:`.intake`), the ids it lets through (:mod:`.names`), the feedback
it hands back (:mod:`.returning`), its one-instance lock (:mod:`.lock`) and its grading runs' processes
(:mod:`.processes`). ``python -m autograder.service --course DIR --exchange DIR`` runs it."""
