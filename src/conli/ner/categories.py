"""Canonical entity categories (Azure Text Analytics names) and spaCy's labels for them.

The CoNLI paper selected Text Analytics categories; mapping spaCy's OntoNotes labels onto
the same names means "entity" means the same thing whichever NER backend runs.
"""

from __future__ import annotations

from conli.errors import ConfigError

KNOWN_CATEGORIES: frozenset[str] = frozenset(
    {
        "Person",
        "PersonType",
        "Location",
        "Organization",
        "Event",
        "Product",
        "Skill",
        "DateTime",
        "Quantity",
        "Address",
        "PhoneNumber",
        "Email",
        "URL",
        "IP",
    }
)

# spaCy (OntoNotes) label -> canonical category. LAW and LANGUAGE have no counterpart.
SPACY_TO_CATEGORY: dict[str, str] = {
    "PERSON": "Person",
    "NORP": "PersonType",
    "GPE": "Location",
    "LOC": "Location",
    "FAC": "Location",
    "ORG": "Organization",
    "EVENT": "Event",
    "PRODUCT": "Product",
    "WORK_OF_ART": "Product",
    "DATE": "DateTime",
    "TIME": "DateTime",
    "CARDINAL": "Quantity",
    "ORDINAL": "Quantity",
    "QUANTITY": "Quantity",
    "MONEY": "Quantity",
    "PERCENT": "Quantity",
}


def validate_categories(categories: list[str]) -> frozenset[str]:
    """The configured categories as a set; an unknown name lists the valid ones."""
    unknown = sorted(set(categories) - KNOWN_CATEGORIES)
    if unknown:
        raise ConfigError(
            f"unknown entity categories {unknown}; valid: {', '.join(sorted(KNOWN_CATEGORIES))}"
        )
    return frozenset(categories)


# --- Azure Text Analytics ----------------------------------------------------------------
# The service's categories are our canonical names. Its subcategories (e.g. DateTime's
# DateRange and Duration, Quantity's Number and Currency) roll up to their parent, in case a
# service version reports a subcategory where the category belongs.
AZURE_SUBCATEGORY_PARENT: dict[str, str] = {
    **dict.fromkeys(("Date", "Time", "DateRange", "TimeRange", "Duration", "Set"), "DateTime"),
    **dict.fromkeys(
        ("Number", "Percentage", "Ordinal", "Age", "Currency", "Dimension", "Temperature"),
        "Quantity",
    ),
    **dict.fromkeys(("GPE", "Structure", "Geographical"), "Location"),
    **dict.fromkeys(("Medical", "Stock exchange", "Sports"), "Organization"),
}


def azure_category(category: str, subcategory: str | None = None) -> str | None:
    """Our canonical category for a Text Analytics category/subcategory; None if unknown."""
    if category in KNOWN_CATEGORIES:
        return category
    for name in (category, subcategory):
        if name and name in AZURE_SUBCATEGORY_PARENT:
            return AZURE_SUBCATEGORY_PARENT[name]
    return None
