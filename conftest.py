"""Load the notebook harness (tests/harness.py): chapters and the scorecard run as tests."""

import pytest

from lib import settings
from tests.harness import (  # noqa: F401  pytest finds hooks by name in this module
    MystCell,
    MystNotebook,
    patient_nbval,
    pytest_addoption,
    pytest_collect_file,
    pytest_collection_modifyitems,
    pytest_ignore_collect,
    pytest_runtest_logreport,
    pytest_sessionstart,
    pytest_terminal_summary,
)


def pytest_configure(config):
    """Check every REPRO_* setting before anything reads one: a bad one is a usage error
    (one clear message, exit status 4), not an internal error with a traceback. Then give
    nbval's fixed waits the harness's patience."""
    try:
        settings.check_environment()
    except settings.SettingError as err:
        raise pytest.UsageError(f"bad settings (the README's Settings section):\n{err}") from None
    patient_nbval(config)
