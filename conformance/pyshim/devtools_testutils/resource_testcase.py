from . import RESOURCE_GROUP_PARAM  # noqa: F401
