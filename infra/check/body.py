"""Every property of a resource body against the model of its type@apiVersion.

An unknown property, a read-only one, a missing required one, a value of the wrong type or outside
the enum is a finding. Values known only at deployment are checked by the type their expression
guarantees (see evaluate.Unknown); ``null`` means "left out", as in ARM.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from infra.check import schema as schemas
from infra.check.evaluate import LDict, ModuleRef, ResourceRef, RuntimeObject, Unknown, bicep_type

ISO_DURATION = re.compile(
    r"^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$"
)

# Bicep type of a value -> the SDK kinds it can fill.
COMPATIBLE = {
    "string": {"string", "duration", "datetime", "date", "any"},
    "int": {"int", "number", "any"},
    "bool": {"bool", "any"},
    "object": {"model", "dict", "any"},
    "array": {"list", "any"},
}


class BodyChecker:
    def __init__(self, report: Any) -> None:
        self.report = report  # report(line, path, message, file=None)
        # the file whose lines are being reported (values passed into a module keep theirs)
        self.file: Path | None = None

    def check_resource(self, body: Any, schema: schemas.ObjectSchema, line: int,
                       runtime: schemas.ObjectSchema | None = None) -> None:
        """``runtime`` is the GET model where it differs from the PUT one: a key that only it has is
        a read-only property, not a misspelling."""
        if not isinstance(body, dict):
            return
        request = LDict({k: v for k, v in body.items() if k not in schemas.TEMPLATE_KEYS},
                        lines=getattr(body, "lines", {}), file=getattr(body, "file", None))
        self.check_object(request, schema, "", line, runtime)

    def check_object(self, value: Any, schema: schemas.ObjectSchema, path: str, line: int,
                     shadow: schemas.ObjectSchema | None = None) -> None:
        if isinstance(value, Unknown):
            if value.type not in ("object", "any"):
                self._report(line, path, f"expects an object ({schema.name}), the expression gives {value.type}")
            return
        if isinstance(value, ResourceRef | ModuleRef | RuntimeObject):
            return
        if not isinstance(value, dict):
            self._report(line, path, f"expects an object ({schema.name}), got {bicep_type(value)} {value!r}")
            return
        if schema.discriminator is not None and schema.subtype_classes:
            chosen = value.get(schema.discriminator)
            if isinstance(chosen, str):
                subtype = schema.subtype(chosen)
                if subtype is None:
                    where = f"{path}.{schema.discriminator}" if path else schema.discriminator
                    self._report(getattr(value, "lines", {}).get(schema.discriminator, line), where,
                                 f"{chosen!r} is not a subtype of {schema.name} in this API version "
                                 f"(known: {', '.join(sorted(schema.subtype_classes))})")
                    return
                schema = subtype
        lines = getattr(value, "lines", {})
        outer_file = self.file
        if lines and isinstance(value, LDict) and value.file is not None:
            self.file = value.file
        elif not lines:
            lines = {}
        try:
            self._check_keys(value, schema, path, line, lines, shadow)
        finally:
            self.file = outer_file

    def _report(self, line: int, path: str, message: str) -> None:
        self.report(line, path, message, self.file)

    def _check_keys(self, value: dict, schema: schemas.ObjectSchema, path: str, line: int,
                    lines: dict[str, int], shadow: schemas.ObjectSchema | None) -> None:
        for key, item in value.items():
            item_line = lines.get(key, line)
            item_path = f"{path}.{key}" if path else key
            entry = schema.fields.get(key)
            shadow_entry = shadow.fields.get(key) if shadow is not None else None
            if entry is None:
                if schema.open:
                    continue
                if shadow is not None and isinstance(shadow_entry, schemas.FieldSchema) and shadow_entry.readonly:
                    self._report(item_line, item_path,
                                 f"is read-only ({shadow.name} returns it; {schema.name} does not accept it)")
                    continue
                self._report(item_line, item_path, self._unknown_message(key, schema))
                continue
            if isinstance(entry, schemas.ObjectSchema):  # a flattened level such as "properties"
                self.check_object(item, entry, item_path, item_line,
                                  shadow_entry if isinstance(shadow_entry, schemas.ObjectSchema) else None)
                continue
            if (not entry.readonly and entry.type.kind == "model" and entry.type.model is not None
                    and isinstance(shadow_entry, schemas.FieldSchema) and shadow_entry.type.model is not None):
                self.check_object(item, entry.type.model, item_path, item_line, shadow_entry.type.model)
                continue
            if entry.readonly and item is not None:
                self._report(item_line, item_path, f"is read-only in {schema.name}: ARM sets it, a template may not")
                continue
            self.check_value(item, entry.type, item_path, item_line, entry)
        for key, entry in schema.fields.items():
            if key in value:
                continue
            if isinstance(entry, schemas.FieldSchema) and entry.required:
                self._report(line, f"{path}.{key}" if path else key, f"is required by {schema.name} and missing")

    def _unknown_message(self, key: str, schema: schemas.ObjectSchema) -> str:
        names = [k for k, v in schema.fields.items() if not (isinstance(v, schemas.FieldSchema) and v.readonly)]
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        folded = [n for n in names if n.lower() == key.lower()]
        hint = f"; did you mean '{(folded or close)[0]}'?" if (folded or close) else ""
        return f"unknown property: {schema.name} has no '{key}'{hint}"

    def check_value(self, value: Any, expected: schemas.TypeRef, path: str, line: int,
                    entry: schemas.FieldSchema | None = None) -> None:
        if value is None or expected.kind == "any":
            return
        if expected.kind == "model" and expected.model is not None:
            self.check_object(value, expected.model, path, line)
            return
        actual = bicep_type(value)
        if actual == "any" or isinstance(value, ResourceRef | ModuleRef | RuntimeObject):
            return
        if expected.kind not in COMPATIBLE.get(actual, set()):
            shown = "" if isinstance(value, Unknown) else f" {value!r}"
            self._report(line, path, f"wrong type: expects {expected.describe()}, got {actual}{shown}")
            return
        if isinstance(value, Unknown):
            return
        if expected.kind == "list":
            for index, item in enumerate(value):
                self.check_value(item, expected.item or schemas.TypeRef("any"), f"{path}[{index}]", line)
        elif expected.kind == "dict":
            lines = getattr(value, "lines", {})
            for key, item in value.items():
                self.check_value(item, expected.item or schemas.TypeRef("any"), f"{path}.{key}", lines.get(key, line))
        elif expected.enum_values:
            if value.lower() not in {v.lower() for v in expected.enum_values}:
                self._report(line, path, f"{value!r} is not a value of {expected.name} in this API version "
                                        f"(allowed: {', '.join(expected.enum_values)})")
        elif expected.kind == "duration" and not ISO_DURATION.match(value):
            self._report(line, path, f"{value!r} is not an ISO 8601 duration")
        elif entry is not None and isinstance(value, int):
            if entry.minimum is not None and value < entry.minimum:
                self._report(line, path, f"{value} is below the minimum {entry.minimum}")
            if entry.maximum is not None and value > entry.maximum:
                self._report(line, path, f"{value} is above the maximum {entry.maximum}")
