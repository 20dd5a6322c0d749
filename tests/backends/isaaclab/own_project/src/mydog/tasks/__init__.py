"""The project's task registrations: importing this package registers every task family below it."""

from isaaclab_tasks.utils import import_packages

import_packages(__name__, [])
