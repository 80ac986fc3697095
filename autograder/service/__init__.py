"""Feedback on submit: a service that grades each new submission in nbgrader's exchange (:mod:`.service`), with
its queue on disk (:mod:`.queue`), its settings (:mod:`.settings`), its own course folder (:mod:`.workfolder`)
and its grading runs' processes (:mod:`.processes`). ``python -m autograder.service --course DIR --exchange DIR``
runs it."""
