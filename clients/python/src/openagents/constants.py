"""The schema's constants (`VERSION`, `MAX_FRAME`, `MAX_OUTPUT`, ...), generated from `schema/`."""

from ._generated.constants import *  # noqa: F403
from ._generated.constants import __all__ as __all__
