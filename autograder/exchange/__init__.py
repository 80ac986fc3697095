"""The course's HTTP exchange for hub courses (deploy/jupyterhub/README.md): nbgrader's exchange steps (fetch,
submit, list, fetch feedback; the instructor's release and collect) over HTTP to ``autograder.service.http``,
authenticated by the hub user's own token. The student a submission counts for is who the hub says sent it."""
