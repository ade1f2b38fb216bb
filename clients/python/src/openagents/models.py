"""The protocol's types as pydantic models, generated from `schema/` (see `openagents._generated`)."""

from ._generated.models import *  # noqa: F403
from ._generated.models import __all__ as __all__
