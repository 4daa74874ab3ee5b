"""A reflection withheld for one revoked observation leaves its other observations active."""

from __future__ import annotations

from prism_om.core.ledger import fold_ledger
from prism_om.core.projection import build_observational_memory_projection_from_entries
from prism_om.core.render import render_observational_memory
from prism_om.entries import custom_entry, message_entry


def test_other_observations_of_a_withheld_reflection_stay_visible() -> None:
    m0 = message_entry("s", "user", "secret 123-45-6789", parent_id=None)
    m1 = message_entry("s", "user", "ship friday", parent_id=m0.id)
    obs = {
        "type": "om.observations.recorded",
        "observations": [
            {"id": "aaaaaaaaaaaa", "text": "secret 123-45-6789", "sourceEntryIds": [m0.id],
             "observedAt": m0.timestamp, "priority": "high"},
            {"id": "bbbbbbbbbbbb", "text": "ships friday", "sourceEntryIds": [m1.id],
             "observedAt": m1.timestamp, "priority": "high"},
        ],
        "coversUpToId": m1.id,
    }  # fmt: skip
    e_obs = custom_entry("s", obs, parent_id=m1.id)
    refl = {
        "type": "om.reflections.recorded",
        "reflections": [
            {"id": "cccccccccccc", "text": "secret 123-45-6789; ships friday",
             "observationIds": ["aaaaaaaaaaaa", "bbbbbbbbbbbb"], "priority": "high"},
        ],
        "coversUpToId": e_obs.id,
    }  # fmt: skip
    entries = [m0, m1, e_obs, custom_entry("s", refl, parent_id=e_obs.id)]
    projection = build_observational_memory_projection_from_entries(
        fold_ledger(entries), invalidated_ids={m0.id}
    )
    assert projection.active_reflections == ()
    assert [o.id for o in projection.active_observations] == ["bbbbbbbbbbbb"]
    assert [o.id for o in projection.visible_observations] == ["bbbbbbbbbbbb"]
    text = render_observational_memory(
        projection.visible_reflections, projection.visible_observations
    )
    assert "ships friday" in text and "123-45-6789" not in text
