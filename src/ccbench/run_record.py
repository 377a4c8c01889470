"""`RunRecord`, the typed summary.json: the record's own fields (ccbench.record) and,
composed here in one place, each registered instrument's part (ccbench.instruments:
its `summary_key`, `summary_type`, `summary_doc`, `summary_after`), each declared once
in its instrument's module. Every reader of a run's record reads this model; an
instrument's part is read typed by `TheInstrument.part_of(rec)`.
"""

from __future__ import annotations

from pydantic.fields import FieldInfo

from ccbench import instruments
from ccbench.part import d
from ccbench.record import RecordFields


class RunRecord(RecordFields):
    """One run's record: RecordFields with every instrument's part (null where it did
    not record)."""


def placed(fields: list[str], parts: list[tuple[str, str | None]]) -> list[str]:
    """`fields` with each part's key (key, the field it follows; None: after all others)
    put right after that field, after the parts `parts` placed there before it (so
    two parts that follow one field keep their order); a part that follows another
    part waits for it. TypeError naming the parts that follow no field."""
    order, pending = list(fields), list(parts)
    last: dict[str, str] = {}  # a field -> the last part put after it
    while pending:
        ready = [p for p in pending if p[1] is None or p[1] in order]
        if not ready:
            names = ", ".join(f"{k} after {a!r}" for k, a in pending)
            raise TypeError(f"record parts that follow no field of the record: {names}")
        for key, after in ready:
            if key in order:
                raise TypeError(f"record part {key!r} is a field already")
            if after is None:
                order.append(key)
                continue
            order.insert(order.index(last.get(after, after)) + 1, key)
            last[after] = key
        pending = [p for p in pending if p not in ready]
    return order


def _compose() -> None:
    """Each registered instrument's part as a field of RunRecord by its `summary_key`,
    of its type or null, placed by its `summary_after`. pydantic builds a model's fields
    when the class is made: these are put among them and the model rebuilt."""
    fields = dict(RunRecord.__pydantic_fields__)
    kinds = [c for c in instruments.REGISTRY.values() if c.summary_key is not None]
    for cls in kinds:
        if cls.summary_type is None:
            raise TypeError(f"instrument {cls.name}: part {cls.summary_key!r} has no type "
                            "(Instrument[ThePart])")  # fmt: skip
    order = placed(list(fields), [(c.summary_key or "", c.summary_after) for c in kinds])
    for cls in kinds:
        fields[cls.summary_key or ""] = FieldInfo.from_annotated_attribute(
            cls.summary_type | None, d(cls.summary_doc, None)
        )
    RunRecord.__pydantic_fields__ = {k: fields[k] for k in order}
    RunRecord.model_rebuild(force=True)


_compose()

__all__ = ["RunRecord"]
