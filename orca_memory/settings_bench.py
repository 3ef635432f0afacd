"""The service's settings (orca_memory.settings) with the `bench` app, whose benchmark and
evaluation commands (`eval_locomo`, `bench_*`, `loadtest`, ...) measure the service from
outside it: manage.py chooses these for its commands, but for the ones that serve (see
`manage.py`). The web server (wsgi.py) and the task worker never load `bench`."""

from __future__ import annotations

from orca_memory.settings import *  # noqa: F403
from orca_memory.settings import INSTALLED_APPS

# Last: its commands replace no other app's.
INSTALLED_APPS = [*INSTALLED_APPS, "bench"]
