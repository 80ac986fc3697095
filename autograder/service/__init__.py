"""Feedback on submit: a service that grades each new submission in nbgrader's exchange (:mod:`.service`), with
its queue on disk (:mod:`.queue`). ``python -m autograder.service --course DIR --exchange DIR`` runs it."""
