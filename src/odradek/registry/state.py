"""The registry's state, rebuilt from the records of the `_schemas` topic, and the checks that turn a request
into new records.

Every change is a record (key and value are JSON), keyed so that log compaction keeps exactly what the
state needs:

    {"keytype": "SCHEMA", "subject": S, "version": V}  -> {"subject", "version", "id", "schemaType", "schema",
                                                           "deleted": bool, "references": [...] if any}
                                                        or, once permanently deleted, a marker without the
                                                           schema text: {"subject", "version", "id",
                                                           "purged": true}
    {"keytype": "CONFIG", "subject": S or null}         -> {"compatibilityLevel": L}, or null (deleted)
    {"keytype": "MODE", "subject": null}                -> {"mode": M}

A permanent delete writes a marker rather than a tombstone so that compaction can never lose the highest id
or version ever handed out: ids are max + 1 over the log, and an id must never be given to a second schema.

A schema's `references` name other subjects' versions; parsing a version parses what it references first
(formats.py). A referenced version cannot be deleted while a schema that references it exists.

`State` is not thread-safe by itself; the store (store.py) holds its lock around every use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from odradek.registry import compatibility, errors
from odradek.registry.formats import format_of
from odradek.registry.schema import InvalidSchema, ParsedSchema, Reference

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1

Record = tuple[dict, "dict | None"]


@dataclass
class Version:
    subject: str
    version: int
    id: int
    schema: str | None  # None once purged
    schema_type: str = "AVRO"
    deleted: bool = False
    references: tuple[Reference, ...] = ()
    _parsed: ParsedSchema | None = field(default=None, repr=False)

    @property
    def purged(self) -> bool:
        return self.schema is None

    def refers_to(self, subject: str, version: int) -> bool:
        return any(r.subject == subject and r.version == version for r in self.references)

    def body(self, schema: str | None = None) -> dict[str, Any]:
        """The JSON answer for GET /subjects/S/versions/V (`schema`: the text in another form)."""
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id,
                               "schema": schema if schema is not None else self.schema}
        if self.schema_type != "AVRO":  # Confluent leaves schemaType out for Avro
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.as_json() for r in self.references]
        return out


def schema_key(subject: str, version: int) -> dict:
    return {"keytype": "SCHEMA", "subject": subject, "version": version}


def version_value(v: Version) -> dict:
    if v.purged:
        return {"subject": v.subject, "version": v.version, "id": v.id, "purged": True}
    out = {"subject": v.subject, "version": v.version, "id": v.id, "schemaType": v.schema_type,
           "schema": v.schema, "deleted": v.deleted}
    if v.references:
        out["references"] = [r.as_json() for r in v.references]
    return out


def parse_references(raw: object) -> tuple[Reference, ...]:
    """The `references` of a request or a record: a list of {"name", "subject", "version"}."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise errors.invalid_schema("Invalid schema: 'references' must be a list")
    found: list[Reference] = []
    for r in raw:
        if not (isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
                and isinstance(r.get("version"), int) and not isinstance(r.get("version"), bool)):
            raise errors.invalid_schema(f"Invalid schema: a reference needs a name, a subject and a version: {r!r}")
        found.append(Reference(r["name"], r["subject"], r["version"]))
    return tuple(found)


def parse_version(text: str) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or "latest" / -1 (None: the latest)."""
    if text == "latest" or text == "-1":
        return None
    try:
        number = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(text)
    return number


class State:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, Version]] = {}
        self.max_id = 0
        self.configs: dict[str | None, str] = {}
        self.mode = "READWRITE"

    # -- replaying the log --------------------------------------------------------------------------------

    def apply(self, key: dict, value: dict | None) -> None:
        """Apply one record of the log (records of unknown kinds, e.g. a newer registry's, are skipped)."""
        kind = key.get("keytype")
        if kind == "SCHEMA":
            subject, number = key["subject"], int(key["version"])
            versions = self.subjects.setdefault(subject, {})
            if value is None:
                versions.pop(number, None)
                return
            self.max_id = max(self.max_id, int(value["id"]))
            schema = None if value.get("purged") else value["schema"]
            versions[number] = Version(subject, number, int(value["id"]), schema,
                                       value.get("schemaType") or "AVRO", bool(value.get("deleted")),
                                       parse_references(value.get("references")))
        elif kind == "CONFIG":
            if value is None:
                self.configs.pop(key.get("subject"), None)
            else:
                self.configs[key.get("subject")] = value["compatibilityLevel"]
        elif kind == "MODE":
            if value is not None:
                self.mode = value["mode"]

    # -- reading ------------------------------------------------------------------------------------------

    def _versions(self, subject: str, deleted: bool = False) -> list[Version]:
        """The subject's versions in order: live ones, and soft-deleted ones too if `deleted`."""
        found = self.subjects.get(subject, {})
        return [v for _, v in sorted(found.items()) if not v.purged and (deleted or not v.deleted)]

    def subject_names(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s in self.subjects if s.startswith(prefix) and self._versions(s, deleted))

    def version_numbers(self, subject: str, deleted: bool = False) -> list[int]:
        found = self._versions(subject, deleted)
        if not found:
            raise errors.subject_not_found(subject)
        return [v.version for v in found]

    def get_version(self, subject: str, version_text: str, deleted: bool = False) -> Version:
        number = parse_version(version_text)
        found = self._versions(subject, deleted)
        if not found:
            raise errors.subject_not_found(subject)
        if number is None:
            return found[-1]
        for v in found:
            if v.version == number:
                return v
        raise errors.version_not_found(subject, number)

    def schema_by_id(self, schema_id: int) -> Version:
        for versions in self.subjects.values():
            for v in versions.values():
                if v.id == schema_id and not v.purged:
                    return v
        raise errors.schema_not_found(f"Schema {schema_id} not found")

    def subjects_of_id(self, schema_id: int, deleted: bool = False) -> list[dict]:
        return [{"subject": v.subject, "version": v.version}
                for s in sorted(self.subjects) for v in self._versions(s, deleted) if v.id == schema_id]

    # -- parsing, with references ----------------------------------------------------------------------

    def parsed(self, v: Version, visiting: frozenset[tuple[str, int]] = frozenset()) -> ParsedSchema:
        """The version's schema parsed, its references resolved first (cached on the version)."""
        if v._parsed is None:
            if (v.subject, v.version) in visiting:
                raise InvalidSchema(f"Invalid schema: references of {v.subject} version {v.version} form a cycle")
            resolved = self._resolve(v.references, visiting | {(v.subject, v.version)})
            v._parsed = format_of(v.schema_type).parse(v.schema or "", resolved)
        return v._parsed

    def _resolve(self, references: tuple[Reference, ...],
                 visiting: frozenset[tuple[str, int]] = frozenset()) -> list[tuple[str, ParsedSchema]]:
        resolved = []
        for r in references:
            target = self.subjects.get(r.subject, {}).get(r.version)
            if target is None or target.purged:
                raise InvalidSchema(f"Invalid schema: reference {r.name!r} names {r.subject} version {r.version}, "
                                    "which does not exist")
            resolved.append((r.name, self.parsed(target, visiting)))
        return resolved

    def parse(self, text: object, schema_type: str, references: tuple[Reference, ...] = ()) -> ParsedSchema:
        """A request's schema parsed; 42201 when it is not a valid schema of its type."""
        if not isinstance(text, str):
            raise errors.invalid_schema("Invalid schema: 'schema' must be a string")
        try:
            return format_of(schema_type).parse(text, self._resolve(references))
        except InvalidSchema as exc:
            raise errors.invalid_schema(str(exc)) from None
        except RecursionError:  # a parser's own recursion, on a schema within the limits of formats.py
            raise errors.invalid_schema("Invalid schema: nested too deeply to parse") from None

    def identity(self, v: Version) -> tuple | None:
        """What makes two versions the same schema (None if the stored schema no longer parses)."""
        if v.purged:
            return None
        try:
            return _identity(v.schema_type, self.parsed(v), v.references)
        except InvalidSchema:
            return None

    def render(self, v: Version, fmt: str | None) -> str | None:
        """The version's schema text in form `fmt` (?format=), or as registered."""
        if not fmt or v.purged:
            return v.schema
        try:
            return format_of(v.schema_type).render(self.parsed(v), fmt) or v.schema
        except InvalidSchema:
            return v.schema

    def _id_for(self, key: tuple) -> int | None:
        """The id already given to this schema under any subject (one schema, one id, across subjects)."""
        for versions in self.subjects.values():
            for v in versions.values():
                if self.identity(v) == key:
                    return v.id
        return None

    def referenced_by(self, subject: str, version_text: str) -> list[int]:
        """Ids of the live schemas whose references name this version."""
        target = self.get_version(subject, version_text)
        return sorted({v.id for s in self.subjects for v in self._versions(s)
                       if v.refers_to(target.subject, target.version)})

    def _check_unreferenced(self, doomed: list[Version], permanent: bool) -> None:
        """42206 if a schema still references one of `doomed` (soft-deleted referrers count for a permanent
        delete: their text still needs the referenced one)."""
        for v in doomed:
            for s in self.subjects:
                for other in self._versions(s, deleted=permanent):
                    if other.refers_to(v.subject, v.version) and all(other is not d for d in doomed):
                        raise errors.reference_exists(
                            f"One or more references exist to the schema {{subject={v.subject}, "
                            f"version={v.version}}} (from {other.subject} version {other.version})")

    def lookup(self, subject: str, text: str, schema_type: str, deleted: bool = False,
               references: tuple[Reference, ...] = ()) -> Version:
        key = _identity(schema_type, self.parse(text, schema_type, references), references)
        found = self._versions(subject, deleted)
        if not found:
            raise errors.subject_not_found(subject)
        for v in reversed(found):
            if self.identity(v) == key:
                return v
        raise errors.schema_not_found()

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, compatibility.DEFAULT_LEVEL)

    def subject_level(self, subject: str, default_to_global: bool) -> str:
        if subject in self.configs:
            return self.configs[subject]
        if default_to_global:
            return self.level(None)
        raise errors.subject_config_not_found(subject)

    def check(self, subject: str, text: str, schema_type: str, version_text: str | None,
              references: tuple[Reference, ...] = ()) -> list[str]:
        """Compatibility problems of `text` against the subject's version `version_text` (None: all live
        versions the level looks at, as a registration would)."""
        schema = self.parse(text, schema_type, references)
        live = self._versions(subject)
        if version_text is None or parse_version(version_text) is None:
            if version_text is not None and not live:
                raise errors.subject_not_found(subject)
            against = live
        else:
            against = [self.get_version(subject, version_text)]
        return compatibility.problems(self.level(subject), schema, self._parsed_all(against))

    def _parsed_all(self, versions: list[Version]) -> list[ParsedSchema]:
        try:
            return [self.parsed(v) for v in versions]
        except InvalidSchema as exc:
            raise errors.invalid_schema(f"A registered version no longer parses: {exc}") from None

    # -- planning changes: checks, then the records that make them ------------------------------------------

    def plan_register(self, subject: str, text: str, schema_type: str, wanted_id: int | None = None,
                      wanted_version: int | None = None,
                      references: tuple[Reference, ...] = ()) -> tuple[list[Record], int]:
        """Records that register `text` under `subject`, and its id (no records if it is already there)."""
        if self.mode == "READONLY":
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")
        importing = self.mode == "IMPORT"
        if not importing and (wanted_id is not None or wanted_version is not None):
            raise errors.not_permitted("An id or version can only be given in IMPORT mode")
        schema = self.parse(text, schema_type, references)
        key = _identity(schema_type, schema, references)
        live = self._versions(subject)
        for v in live:
            if self.identity(v) == key and wanted_version in (None, v.version):
                return [], v.id
        if not importing:
            found = compatibility.problems(self.level(subject), schema, self._parsed_all(live))
            if found:
                raise errors.incompatible(found)
        existing = self._id_for(key)
        if wanted_id is not None:
            if existing is not None and existing != wanted_id:
                raise errors.not_permitted(f"Schema already registered with id {existing} instead of input id "
                                           f"{wanted_id}")
            other = self._holder(wanted_id)
            if other is not None and self.identity(other) != key:
                raise errors.not_permitted(f"Overwrite new schema with id {wanted_id} is not permitted.")
            schema_id = wanted_id
        else:
            schema_id = existing if existing is not None else self.max_id + 1
        numbers = self.subjects.get(subject, {})
        # versions only grow, even past soft- and permanently deleted ones, so a version number always
        # names one schema
        number = wanted_version if wanted_version is not None else max(numbers, default=0) + 1
        if number in numbers and not numbers[number].purged:
            raise errors.not_permitted(f"Version {number} of subject {subject} already exists")
        v = Version(subject, number, schema_id, text, schema_type, references=references)
        return [(schema_key(subject, number), version_value(v))], schema_id

    def _holder(self, schema_id: int) -> Version | None:
        try:
            return self.schema_by_id(schema_id)
        except errors.RegistryError:
            return None

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[Record], list[int]]:
        live = self._versions(subject)
        every = self._versions(subject, deleted=True)
        if not every:
            raise errors.subject_not_found(subject)
        if not permanent:
            if not live:
                raise errors.subject_soft_deleted(subject)
            self._check_unreferenced(live, permanent)
            records = [(schema_key(subject, v.version), version_value(_soft_deleted(v))) for v in live]
            return records, [v.version for v in live]
        if live:
            raise errors.subject_not_soft_deleted(subject)
        self._check_unreferenced(every, permanent)
        records = [(schema_key(subject, v.version), version_value(_purged(v))) for v in every]
        return records, [v.version for v in every]

    def plan_delete_version(self, subject: str, version_text: str, permanent: bool) -> tuple[list[Record], int]:
        number = parse_version(version_text)
        every = self._versions(subject, deleted=True)
        if not every:
            raise errors.subject_not_found(subject)
        if number is None:
            live = self._versions(subject)
            if not live and not permanent:
                raise errors.subject_soft_deleted(subject)
            # "latest" of a permanent delete is the latest version, soft-deleted or not
            v = (live or every)[-1] if not permanent else every[-1]
        else:
            match = [v for v in every if v.version == number]
            if not match:
                raise errors.version_not_found(subject, number)
            v = match[0]
        if not permanent:
            if v.deleted:
                raise errors.version_soft_deleted(subject, v.version)
            self._check_unreferenced([v], permanent)
            return [(schema_key(subject, v.version), version_value(_soft_deleted(v)))], v.version
        if not v.deleted:
            raise errors.version_not_soft_deleted(subject, v.version)
        self._check_unreferenced([v], permanent)
        return [(schema_key(subject, v.version), version_value(_purged(v)))], v.version

    def plan_config(self, subject: str | None, level: object) -> list[Record]:
        if not isinstance(level, str) or level.upper() not in compatibility.LEVELS:
            raise errors.invalid_compatibility(level)
        return [({"keytype": "CONFIG", "subject": subject}, {"compatibilityLevel": level.upper()})]

    def plan_delete_config(self, subject: str) -> tuple[list[Record], str]:
        if subject not in self.configs and not self._versions(subject, deleted=True):
            raise errors.subject_not_found(subject)
        previous = self.level(subject)
        return [({"keytype": "CONFIG", "subject": subject}, None)], previous

    def plan_mode(self, mode: object, force: bool) -> list[Record]:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and self.mode != "IMPORT" and not force and self.subject_names(deleted=True):
            raise errors.not_permitted("Cannot import since found existing subjects")
        return [({"keytype": "MODE", "subject": None}, {"mode": mode})]


def _soft_deleted(v: Version) -> Version:
    return Version(v.subject, v.version, v.id, v.schema, v.schema_type, True, v.references)


def _purged(v: Version) -> Version:
    return Version(v.subject, v.version, v.id, None, v.schema_type, True, v.references)


def _identity(schema_type: str, schema: ParsedSchema, references: tuple[Reference, ...]) -> tuple:
    return schema_type, schema.identity, references

