"""A reflection that only restates observations shown beside it is left out of the render
(issue 18 item 2); it renders again once one of its observations is not shown."""

from __future__ import annotations

from prism_om.core.records import Observation, Reflection
from prism_om.core.render import render_observational_memory_details

ADOPTED = "Caroline: adopted puppy yesterday (7 May 2023); name Biscuit; 10 weeks old."
CLIMBS = "Melanie: started pottery class; every Wednesday evening."


def _obs(n: int, text: str, day: str = "2023-05-08", priority: str = "high") -> Observation:
    return Observation.model_validate(
        {
            "id": f"{n:012x}",
            "text": text,
            "sourceEntryIds": [f"m{n}"],
            "observedAt": f"{day}T13:56:00.000Z",
            "priority": priority,
        }
    )


def _refl(text: str, *supports: int) -> Reflection:
    return Reflection.model_validate(
        {"id": "f" * 12, "text": text, "observationIds": [f"{n:012x}" for n in supports]}
    )


OBSERVATIONS = [_obs(1, ADOPTED), _obs(2, CLIMBS)]
# The offline reflector's digest: the day (as words), subjects and key words, nothing new.
DIGEST = _refl(
    "8 May 2023: Caroline — adopted puppy (7 May 2023) Biscuit 10 weeks; "
    "Melanie — pottery Wednesday",
    1,
    2,
)


def test_a_reflection_restating_its_rendered_observations_is_left_out() -> None:
    rendered = render_observational_memory_details([DIGEST], OBSERVATIONS)
    assert "## Reflections" not in rendered.text and "f" * 12 not in rendered.text
    assert rendered.reflection_ids == ()
    assert rendered.restating_reflection_ids == ("f" * 12,)
    # Its facts are all still there, in the observations it rests on.
    assert "Biscuit" in rendered.text and "pottery" in rendered.text
    assert rendered.observation_ids == (f"{1:012x}", f"{2:012x}")


def test_it_renders_when_one_of_its_observations_is_not_shown() -> None:
    # The dropper retired the pottery observation: the reflection now stands for it.
    rendered = render_observational_memory_details([DIGEST], OBSERVATIONS[:1])
    assert f"- [{'f' * 12}] 8 May 2023: Caroline" in rendered.text
    assert rendered.reflection_ids == ("f" * 12,)
    assert rendered.restating_reflection_ids == ()


def test_a_reflection_saying_anything_more_renders() -> None:
    inferred = _refl("Caroline is a new dog owner; Melanie took up pottery.", 1, 2)
    other_day = _refl("9 May 2023: Caroline — adopted puppy", 1)
    rendered = render_observational_memory_details([inferred, other_day], OBSERVATIONS)
    assert rendered.text.count("- [ffffffffffff]") == 2
    assert rendered.restating_reflection_ids == ()


def test_it_renders_when_the_cap_omits_one_of_its_observations() -> None:
    filler = [_obs(10 + n, f"Note {n}: " + "x" * 200, priority="low") for n in range(3)]
    low = _obs(3, "Melanie: pottery on Wednesday.", priority="low")
    reflection = _refl("8 May 2023: Melanie — pottery Wednesday", 3)
    full = render_observational_memory_details([reflection], [low, *OBSERVATIONS])
    assert full.reflection_ids == ()
    capped = render_observational_memory_details(
        [reflection], [low, *OBSERVATIONS, *filler], max_bytes=len(full.text.encode()) + 40
    )
    assert f"{3:012x}" in capped.omitted_observation_ids
    assert capped.reflection_ids == ("f" * 12,)
    assert "- [ffffffffffff] 8 May 2023: Melanie" in capped.text
    assert len(capped.text.encode()) <= len(full.text.encode()) + 40
