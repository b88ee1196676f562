"""Per-map vocabulary: what the places of a map are for ("the place where food is kept cold" -> fridge).

A map ``<dir>/<name>.yaml`` may have a vocabulary ``<dir>/vocab/<name>.yaml`` (a folder, not a
``<name>.vocab.yaml`` beside the map, because every ``*.yaml`` in ``sim/maps/`` is a map)::

    map: apartment
    places:
      fridge: [the place where food is kept cold, the appliance that keeps the milk chilled]
      bedroom: [the room where I get dressed]

Every phrase is a noun phrase that reads after "take me to". The file is checked against the map like
the map itself: errors are :class:`~robots._fields.ConfigFileError` (a ``ValueError``) naming the file and
the field, an unknown place gets a "did you mean", and a phrase that is a place's name or alias, contains
one (it would name a place outright, not describe it), or describes two places is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from robots._fields import ConfigFileError, Fields, did_you_mean, load_yaml_mapping
from sim.navigation.world import MAPS_DIR, World, available_maps, load_world

VOCAB_DIR_NAME = "vocab"
VOCAB_KEYS = ("map", "description", "places")


@dataclass(frozen=True)
class Vocabulary:
    """The phrases that describe each place of one map (canonical place name -> phrases)."""

    map: str
    source: str
    descriptions: dict[str, tuple[str, ...]]

    def places(self) -> list[str]:
        return sorted(self.descriptions)


def vocabulary_path(world: World) -> Path:
    """Where the vocabulary of ``world`` lives: ``vocab/<map file stem>.yaml`` beside its map file."""
    source = Path(world.source)
    return source.parent / VOCAB_DIR_NAME / f"{source.stem}.yaml"


def maps_with_vocabulary() -> list[str]:
    """The shipped maps (``sim/maps/``) that have a vocabulary file."""
    return [m for m in available_maps() if (MAPS_DIR / VOCAB_DIR_NAME / f"{m}.yaml").is_file()]


def load_vocabulary(world: World | str, path: str | Path | None = None) -> Vocabulary:
    """The vocabulary of ``world`` (a World, a shipped map name or a map path), from ``path`` or from
    :func:`vocabulary_path`; validated against the map.

    Raises:
        ValueError: no vocabulary file for the map (says where it was looked for).
        ConfigFileError: (a ValueError) ``<file>: <field>: <problem>`` for anything malformed.
    """
    if not isinstance(world, World):
        world = load_world(world)
    path = Path(path) if path is not None else vocabulary_path(world)
    if not path.is_file():
        raise ValueError(
            f"map {world.name!r} has no vocabulary: {str(path)!r} does not exist; write one (see "
            f"sim/maps/vocab/apartment.yaml) or generate for maps that have one: {', '.join(maps_with_vocabulary())}"
        )
    return vocabulary_from_dict(load_yaml_mapping(path), world, source=str(path))


def vocabulary_from_dict(data: object, world: World, source: str = "<vocabulary>") -> Vocabulary:
    """A vocabulary from a mapping (a YAML document), checked against ``world``; see :func:`load_vocabulary`."""
    root = Fields(source, "", data)
    root.reject_unknown(VOCAB_KEYS)
    map_name = root.text("map")
    if map_name != world.name:
        raise root.error("map", f"this vocabulary is for map {map_name!r}, but it was loaded for map {world.name!r}")
    root.string("description")
    places = root.sub("places")
    if not places.data:
        raise places.error(None, "no places: name at least one place of the map and the phrases that describe it")
    labels = _labels(world)
    canonical = [p.name for p in (*world.landmarks, *world.rooms)]
    owner: dict[str, str] = {}
    out: dict[str, tuple[str, ...]] = {}
    for key in places.data:
        name = str(key)
        if name not in canonical:
            hint = did_you_mean(name, canonical)
            if name.lower() in labels:
                hint = f" (it is an alias; use the place's name {labels[name.lower()]!r})"
            raise places.error(
                name, f"unknown place {name!r} in map {world.name!r}{hint}; places: {', '.join(canonical)}"
            )
        phrases = places.string_list(name)
        if not phrases:
            raise places.error(name, "needs at least one phrase")
        for i, phrase in enumerate(phrases):
            where = f"{name}[{i}]"
            text = " ".join(phrase.lower().split())
            if text in owner:
                raise places.error(where, f"{phrase!r} already describes {owner[text]!r}: a phrase describes one place")
            named = named_places(text, labels)
            if named:
                label, place = named[0]
                raise places.error(
                    where,
                    f"{phrase!r} contains {label!r}, a name of {place!r}; a description says what a place is for "
                    "without naming a place (names and aliases live in the map)",
                )
            owner[text] = name
        out[name] = tuple(phrases)
    return Vocabulary(world.name, source, out)


def _labels(world: World) -> dict[str, str]:
    """Every way the map names a place (name, name with spaces, aliases; lower case) -> canonical name."""
    out = {}
    for place in (*world.landmarks, *world.rooms):
        for label in (place.name, place.name.replace("_", " "), *place.aliases):
            out[label.lower()] = place.name
    return out


def named_places(text: str, labels: dict[str, str]) -> list[tuple[str, str]]:
    """(label, place) for every place name or alias that ``text`` contains as whole words."""
    padded = " " + " ".join(re.findall(r"[a-z0-9']+", text.lower())) + " "
    return [(label, place) for label, place in labels.items() if f" {label} " in padded]


__all__ = [
    "ConfigFileError",
    "Vocabulary",
    "load_vocabulary",
    "maps_with_vocabulary",
    "named_places",
    "vocabulary_from_dict",
    "vocabulary_path",
]
