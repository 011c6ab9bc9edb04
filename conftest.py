"""Load the notebook harness (tests/harness.py): chapters and the scorecard run as tests."""

from tests.harness import (  # noqa: F401  pytest finds hooks by name in this module
    MystCell,
    MystNotebook,
    pytest_collect_file,
    pytest_collection_modifyitems,
    pytest_sessionstart,
    pytest_terminal_summary,
)
