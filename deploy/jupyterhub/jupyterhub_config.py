"""JupyterHub configuration of the course's demo hub (deploy/jupyterhub/README.md).

deploy/jupyterhub/demo.py prepares the users, the course copy, the exchange and the Jupyter config folders,
writes them into ``$PTE_HUB_STATE/hub.json`` and starts JupyterHub with this file; everything here is read
from there.
"""
import json
import os
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner

c = get_config()  # noqa: F821 (provided by traitlets when JupyterHub loads this file)

HERE = Path(__file__).resolve().parent
STATE = json.loads((Path(os.environ["PTE_HUB_STATE"]) / "hub.json").read_text())
BIN = Path(sys.executable).parent
HOMES = Path(STATE["homes"])

# ---- where the hub listens: the proxy on the public port, the hub and the proxy's API on loopback
c.JupyterHub.ip = STATE["ip"]
c.JupyterHub.port = STATE["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = STATE["hub_port"]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{STATE['api_port']}"
# configurable-http-proxy from npm, installed beside this file by `make hub` (package.json pins it)
c.ConfigurableHTTPProxy.command = [str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(Path(STATE["hub_dir"]) / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{Path(STATE['hub_dir']) / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(Path(STATE["hub_dir"]) / "jupyterhub_cookie_secret")

# ---- who logs in. A demo: the three users, one shared password. JupyterHub's DummyAuthenticator, as of 5.3
# SharedPasswordAuthenticator (DummyAuthenticator.password is deprecated there in its favour; DummyAuthenticator
# with no password lets anyone in as anyone). A course uses a real authenticator (README.md): LTI 1.3 from
# its LMS (ltiauthenticator's LTI13Authenticator) or OAuth (oauthenticator's GenericOAuthenticator,
# GitHubOAuthenticator, ...), with the same allowed_users / groups below.
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = STATE["password"]
c.Authenticator.allowed_users = {*STATE["students"], STATE["instructor"]}
c.JupyterHub.load_groups = {"instructors": {"users": [STATE["instructor"]]},
                            "students": {"users": STATE["students"]}}


# ---- each user's server: JupyterLab as the Unix user of that name, in a home under the demo's folder
class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner with the home under the demo's folder, so a demo never touches /home."""

    def home(self) -> str:
        return str(HOMES / self.user.name)

    def user_env(self, env):
        env = super().user_env(env)
        env["HOME"] = self.home()
        return env

    def make_preexec_fn(self, name):
        switch_user, home = super().make_preexec_fn(name), self.home()

        def preexec():
            switch_user()
            os.chdir(home)
        return preexec


class SharedUserSpawner(SimpleLocalProcessSpawner):
    """Not root: every user's server runs as the hub's own Unix user (no permissions between them)."""


if STATE["own_unix_users"]:
    c.JupyterHub.spawner_class = CourseSpawner
else:
    c.JupyterHub.spawner_class = SharedUserSpawner
    c.SimpleLocalProcessSpawner.home_dir_template = str(HOMES / "{username}")

# a Python every user may run, seeing the course's venv (demo.py: the venv's own, or a view of it)
USERS_PYTHON = Path(STATE["users_python"])
c.Spawner.cmd = [str(USERS_PYTHON), "-m", "jupyterhub.singleuser"]
if not STATE["own_unix_users"] and os.geteuid() == 0:
    c.Spawner.args = ["--allow-root"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120


def per_user(spawner):
    """The instructor's server opens on the course folder with the instructor's config; a student's on their
    home with the students' config (no formgrader, no course list, no assignment creation)."""
    instructor = spawner.user.name == STATE["instructor"]
    # a student's own config where all share one Unix user (it names their nbgrader student id)
    role = "instructor" if instructor else next(
        (key for key in STATE["config_dirs"] if key == f"student:{spawner.user.name}"), "students")
    spawner.environment.update({
        "JUPYTER_CONFIG_PATH": STATE["config_dirs"][role],
        "OMP_NUM_THREADS": "1",
        "PATH": f"{USERS_PYTHON.parent}:/usr/local/bin:/usr/bin:/bin",
    })
    spawner.notebook_dir = STATE["course"] if instructor else str(HOMES / spawner.user.name)


c.Spawner.pre_spawn_hook = per_user

# ---- the exchange and the feedback service, two managed services: the hub starts them, restarts one that dies,
# stops them with itself, and gives each an API token of its own. Both run as the hub's user (root here).
# pte-exchange (autograder/service/http.py) is the course's exchange over HTTP: a user's server sends its own
# hub token ($JUPYTERHUB_API_TOKEN, which may reach this service: server_token_scopes below), the service asks
# the hub whose it is, and keeps the submission, in that user's name, in its private folder
# (STATE/service/exchange, root's, 0700). pte-feedback (autograder/service) grades what arrives there and
# releases the feedback there; pte-exchange hands each page to its owner only. Its /report page is the class
# report, for the hub group "instructors" only.
EXCHANGE = STATE["exchange_service"]
ACCESS_EXCHANGE = f"access:services!service={EXCHANGE}"
ROOT_PATH = f"{BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
c.JupyterHub.services = [
    {"name": "pte-feedback",
     "command": [sys.executable, "-m", "autograder.service", "--course", STATE["course"],
                 "--exchange", STATE["service_exchange"]],
     "cwd": STATE["course"],
     "environment": {"OMP_NUM_THREADS": "1", "PATH": ROOT_PATH}},
    {"name": EXCHANGE,
     "url": f"http://127.0.0.1:{STATE['exchange_port']}",
     "command": [sys.executable, "-m", "autograder.service.http", "--course", STATE["course"],
                 "--exchange", STATE["service_exchange"], "--port", str(STATE["exchange_port"]),
                 "--instructor-group", "instructors"],
     "cwd": STATE["service_exchange"],
     "oauth_no_confirm": True,
     "environment": {"OMP_NUM_THREADS": "1", "PATH": ROOT_PATH}},
]
c.JupyterHub.load_roles = [
    {"name": "pte-feedback", "services": ["pte-feedback"], "scopes": []},   # it asks the hub nothing
    {"name": EXCHANGE, "services": [EXCHANGE], "scopes": []},   # it asks the hub only "whose is this token"
    # every course user may use the exchange, from the browser (the report) and from their server (the token)
    {"name": "pte-exchange-users", "groups": ["students", "instructors"], "scopes": [ACCESS_EXCHANGE]},
]
# the token of each user's server: the default (the "server" role) and the exchange
c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", ACCESS_EXCHANGE]
