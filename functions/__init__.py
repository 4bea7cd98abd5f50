"""Azure Functions blueprints, one per role: thin trigger adapters over sender/ and consumers/.

No `from __future__ import annotations` in these modules: the Python worker reads the parameter
annotations (func.Out, the SDK types) as real objects to decide how to bind each argument.
"""
