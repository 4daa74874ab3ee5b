"""The offline observer: statements of fact out of messages, deterministically.

What a message becomes:

* **Chatter is dropped** at observation time: greetings, thanks, goodbyes,
  acknowledgements and reactions ("Wow, that's amazing!") carry no fact. So do aborted
  requests and truncation markers.
* **Statements** of one message are merged into one observation (several when the message
  is long), led by who said it: ``Caroline: I adopted puppy yesterday (7 May 2023)! His
  name is Biscuit.`` A speaker's name written at the start of the text (``Caroline: ...``)
  is kept as the speaker (unless it is a label such as ``Fixed:``); otherwise the role
  is (``User``, ``Assistant``). What one
  speaker tells in one go (their next message, past a question of the other) joins the
  same observation while it stays short. Articles and filler adverbs are left out.
* **Priority comes from the content, never the role**: ``high`` for a statement carrying a
  number, a date, a name, a decision, a commitment or a preference, ``medium`` for other
  statements, ``low`` for questions (kept only when they name something) and routine tool
  output.
* **Dates** resolve against the message's own time or a date header in its text
  (:mod:`.offline_dates`); the day is written into the text and the first one becomes
  ``referencedDate``.
* **Tool calls and results are summarised**, not copied: the tool's name and target
  (``Assistant called read on billing/export.py``), a result's outcome (``24 passed``),
  or its error class and where it was raised (``Tool error: KeyError: 'currency' at
  billing/export.py line 41``).
* **Duplicates collapse**: a statement whose content words repeat an earlier one of the
  batch adds its source to that observation instead of a new one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .offline_dates import message_moment, resolve_dates
from .offline_reflect import telegraph
from .transcript import ParsedEntry

__all__ = ["extract_observations", "is_chatter", "summarize_tool_call", "summarize_tool_result"]

_MAX_TEXT: Final = 400
_MERGE_CHARS: Final = 400
_SPEAKER = re.compile(r"^(?P<name>[A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30})?): (?P<rest>.*)$", re.S)
_SENTENCE = re.compile(
    r"(?<!\b(?:St|Mr|Ms|Dr|Jr|Sr|vs)\.)(?<!\bMrs\.)(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+"
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\u2019_-]*")
_TOOL_CALL = re.compile(r"^(?P<name>[A-Za-z_][\w.-]{0,63})\((?P<args>\{.*\})\)$")
_LEAD = re.compile(
    r"^(?:(?:oh|ooh|well|so|actually|anyway|honestly|yes|yeah|yep|ok|okay|definitely|ha|haha|"
    r"wow|whoa|hey|hi|hello|aww|um|hmm|guess what|by the way|btw|oh my gosh|my gosh|omg|"
    r"i(?:'ve| have) got some (?:exciting |big |good )?news|i forgot to tell you|"
    r"just so you know)\b[\s,!.:;-]*)+",
    re.IGNORECASE,
)
_VOCATIVE = re.compile(r",\s*[A-Z][a-z]+(?=\s*[!.?,]|\s*$)")
_CAPTION = re.compile(r"\[shares a photo: (?P<caption>[^\]]*)\]")
_ERROR_LINE = re.compile(
    r"^\s*(?P<cls>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Fault)|panic|fatal|"
    r"error|ERROR|FAILED)\b[:\s]*(?P<message>.*)$"
)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_TEST_SUMMARY = re.compile(r"\b(\d+) (passed|failed|errors?|skipped)\b")
_TARGET_KEYS: Final = (
    "path",
    "file",
    "file_path",
    "filename",
    "command",
    "cmd",
    "url",
    "query",
    "pattern",
    "name",
    "id",
)
_QUIET_TOOLS: Final = frozenset("read cat ls list glob grep search find view open".split())

_STOP: Final = frozenset(
    "the a an and or but if then than that this these those there their they them what "
    "which who whom whose when where why how with without from into onto about above below "
    "for of on in at to by is are was were be been being do does did done have has had can "
    "could would should will shall may might must just also very really some any all each "
    "your you our ours my mine me we us it its it's i'm i've i'd i'll let's please here "
    "he she him her his hers i'd you're you've you'll that's there's what's he's she's "
    "not no yes so too as up out off over again once still even ever own same more most "
    "am isn't aren't wasn't don't doesn't didn't can't couldn't won't wouldn't".split()
)
# Words of chatter: greetings, thanks, reactions, small talk. A sentence made only of
# these (and stopwords) states no fact.
_CHATTER: Final = frozenset(
    "hi hey hello hiya morning afternoon evening night good great fine well thanks thank "
    "thx ty welcome bye goodbye later soon see talk chat catch care take run gotta "
    "ok okay sure cool nice awesome amazing wow whoa wonderful lovely sweet perfect fun "
    "incredible fantastic excellent brilliant beautiful adorable cute huge congrats "
    "congratulations glad happy proud excited love lol haha ha hahaha aww oh ooh yeah "
    "yep nope totally absolutely exactly indeed agree agreed understood noted got get "
    "sounds sound seems looks like way idea news long time while ages hope week weekend "
    "day going doing busy always new thing things stuff lot lots much many anything "
    "everything something nothing else asking question quick means mean matters matter "
    "really truly honestly definitely course right true kind enjoy enjoyed tell told "
    "say said know knew think thought feel felt guess wish luck done nervous gosh "
    "have has had having been hear heard same too you little mostly couple ones never "
    "sometime place find spoil want".split()
)
_STRONG: Final = frozenset(
    "decide decided decision chose choose chosen agreed agree approve approved plan "
    "planned planning deadline due must prefer preferred favorite favourite switch "
    "switched move moved moving migrate migrated launch ship release budget cancel "
    "cancelled confirmed confirm commit committed schedule scheduled booked book signed "
    "start started starting begin began adopted bought sold leased hired joined quit "
    "finished won lost married engaged graduated promise promised will going allergic "
    "vegetarian vegan hate hates loves named called".split()
)
_FILLER: Final = frozenset(
    "a an the just really totally honestly actually definitely literally basically "
    "already very quite pretty".split()
)
_RANK: Final = {"low": 0, "medium": 1, "high": 2}
# Words that open a message as a label, not as the name of who speaks.
_LABELS: Final = frozenset(
    "fixed fix done note notes update updated error warning summary answer question result "
    "results output status todo tip info example reason plan goal step edit changes "
    "important reminder context problem solution issue cause p.s. ps".split()
)


@dataclass
class _Draft:
    speaker: str
    sources: list[str]
    sentences: list[str]
    priority: str
    referenced: str | None
    kind: str  # "fact", "question", "tool"
    words: frozenset[str] = field(default_factory=frozenset)

    @property
    def text(self) -> str:
        body = " ".join(self.sentences)
        text = body if self.kind == "tool" else f"{self.speaker}: {telegraph(body)}."
        if len(text) > _MAX_TEXT:
            text = text[: _MAX_TEXT - 1].rstrip() + "…"
        return text

    def item(self) -> dict[str, Any]:
        found: dict[str, Any] = {"text": self.text, "sourceEntryIds": list(self.sources)}
        if self.priority != "medium":
            found["priority"] = self.priority
        if self.referenced is not None:
            found["referencedDate"] = self.referenced
        return found


def _words(text: str) -> list[str]:
    return [w.lower().replace("\u2019", "'").strip("'_-") for w in _WORD.findall(text)]


def _content_words(text: str, speakers: frozenset[str] = frozenset()) -> frozenset[str]:
    return frozenset(
        w
        for w in _words(text)
        if len(w) >= 3 and w not in _STOP and w not in _CHATTER and w not in speakers
    )


def _names(sentence: str, speakers: frozenset[str] = frozenset()) -> list[str]:
    """Capitalised words past the first (names, places, titles), not the speakers'."""
    tokens = _WORD.findall(sentence)
    return [
        t
        for t in tokens[1:]
        if t[:1].isupper()
        and t not in ("I", "I'm", "I've", "I'd", "I'll")
        and t.lower() not in speakers
    ]


def _clean(sentence: str) -> str:
    """Without leading interjections and names said in address (", Melanie!")."""
    text = " ".join(sentence.split())
    text = _VOCATIVE.sub("", text)
    text = _LEAD.sub("", text).strip()
    text = re.sub(r"([!?])\1+", r"\1", text)
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    return text


def is_chatter(sentence: str, speakers: frozenset[str] = frozenset()) -> bool:
    """True for a greeting, thanks, acknowledgement or reaction: no fact in it.

    A fact needs a number, a name other than the speakers' (who are addressed in
    greetings), or a word outside the stopwords and the vocabulary of small talk.
    """
    clean = _clean(sentence)
    if not clean:
        return True
    if any(ch.isdigit() for ch in clean) or _names(clean, speakers):
        return False
    return not _content_words(clean, speakers)


def _compact(sentence: str) -> str:
    """Without articles and filler adverbs: fewer tokens, the same fact.

    A capitalised article inside the sentence belongs to a title (``The Night Circus``)
    and stays.
    """
    kept: list[str] = []
    for index, token in enumerate(sentence.split(" ")):
        bare = token.lower().rstrip(",.!?;:")
        if bare in _FILLER and (index == 0 or not token[:1].isupper()):
            tail = token[len(bare) :]
            if tail and kept:
                kept[-1] = kept[-1].rstrip(",") + tail
            continue
        kept.append(token)
    text = " ".join(kept).strip()
    text = re.sub(r",\s*([.!?])", r"\1", text)
    return text[:1].upper() + text[1:] if text else text


def summarize_tool_call(name: str, arguments: Any) -> str:
    """``called <tool> on <target>``: the tool and what it acted on, not its payload."""
    target = ""
    if isinstance(arguments, dict):
        for key in _TARGET_KEYS:
            value = arguments.get(key)
            if isinstance(value, str | int | float) and str(value).strip():
                target = " ".join(str(value).split())
                break
    if len(target) > 100:
        target = target[:99].rstrip() + "…"
    return f"called {name} on {target}" if target else f"called {name}"


def summarize_tool_result(text: str) -> tuple[str, str]:
    """A tool result's outcome in one line, and its priority.

    An error names its class, message and the innermost frame it was raised in (high); a
    test run its counts (medium, high when something failed); anything else its first
    line and size (low).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "Tool result: (empty)", "low"
    if lines[0].startswith("[… truncated"):
        return "Tool result: (truncated)", "low"
    for line in reversed(lines):
        error = _ERROR_LINE.match(line)
        if error and not _TEST_SUMMARY.search(line):
            frames = _FRAME.findall(text)
            where = f" at {frames[-1][0]} line {frames[-1][1]}" if frames else ""
            message = " ".join(error["message"].split())[:120]
            detail = f"{error['cls']}: {message}" if message else error["cls"]
            return f"Tool error: {detail}{where}", "high"
    counts = _TEST_SUMMARY.findall(text)
    if counts:
        failed = any(kind.startswith(("failed", "error")) for _, kind in counts)
        summary = ", ".join(f"{n} {kind}" for n, kind in counts)
        return f"Tool result: {summary}", "high" if failed else "medium"
    first = " ".join(lines[0].split())
    if len(first) > 100:
        first = first[:99].rstrip() + "…"
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return f"Tool result: {first}{more}", "low"


def _split(text: str) -> list[str]:
    return [" ".join(s.split()) for s in _SENTENCE.split(text) if s and s.strip()]


def _weak(sentence: str, speakers: frozenset[str]) -> bool:
    """A remark with one content word and no number, name, date or decision
    ("It was so powerful."): an aside, not a fact worth a line of memory."""
    if _sentence_priority(sentence, resolve_dates(sentence, None).referenced, speakers) == "high":
        return False
    return len(_content_words(sentence, speakers)) < 2


def _sentence_priority(sentence: str, referenced: str | None, speakers: frozenset[str]) -> str:
    words = set(_words(sentence))
    strong = (
        any(ch.isdigit() for ch in sentence)
        or referenced is not None
        or bool(_names(sentence, speakers))
        or bool(words & _STRONG)
        or "going to" in sentence.lower()
    )
    return "high" if strong else "medium"


def _message_drafts(
    entry: ParsedEntry, names: frozenset[str], speakers: frozenset[str]
) -> list[_Draft]:
    text, moment = message_moment(entry.text, entry.timestamp)
    speaker = {"user": "User", "assistant": "Assistant", "tool": "Tool"}.get(entry.role, "")
    named = _SPEAKER.match(text)
    if named and named["name"] in names:
        speaker, text = named["name"], named["rest"]
    if entry.role == "tool":
        summary, priority = summarize_tool_result(text)
        return [_Draft(speaker, [entry.id], [summary], priority, None, "tool")]
    drafts: list[_Draft] = []
    prose: list[str] = []
    for line in text.split("\n"):
        call = _TOOL_CALL.match(line.strip())
        arguments: Any = None
        if call:
            try:
                arguments = json.loads(call["args"])
            except (json.JSONDecodeError, RecursionError):
                call = None
        if call:
            quiet = call["name"].lower() in _QUIET_TOOLS
            summary = f"{speaker} {summarize_tool_call(call['name'], arguments)}"
            drafts.append(
                _Draft(speaker, [entry.id], [summary], "low" if quiet else "medium", None, "tool")
            )
        else:
            prose.append(line)
    text = _CAPTION.sub(lambda m: f"[photo: {m['caption']}]", "\n".join(prose))
    facts: list[str] = []
    questions: list[str] = []
    priority, referenced = "medium", None
    for raw in _split(text):
        if raw.startswith(("[… truncated", "[aborted]")) or is_chatter(raw, speakers):
            continue
        sentence = _clean(raw)
        if not sentence.endswith("?") and _weak(sentence, speakers):
            continue
        dated = resolve_dates(_compact(sentence), moment)
        if sentence.endswith("?"):
            # A question keeps only what it names: "How old is Biscuit?", not "Who with?".
            if _names(sentence, speakers) or any(ch.isdigit() for ch in sentence):
                questions.append(dated.text)
            continue
        facts.append(dated.text)
        referenced = referenced or dated.referenced
        if _sentence_priority(dated.text, dated.referenced, speakers) == "high":
            priority = "high"
    for chunk in _chunks(facts):
        drafts.append(_Draft(speaker, [entry.id], chunk, priority, referenced, "fact"))
    if questions:
        drafts.append(
            _Draft(speaker, [entry.id], [f"asked {' '.join(questions)}"], "low", None, "question")
        )
    for draft in drafts:
        draft.words = _content_words(" ".join(draft.sentences), speakers)
    return drafts


def _chunks(sentences: Sequence[str]) -> list[list[str]]:
    """Sentences in runs of at most ``_MERGE_CHARS`` characters (a long one alone)."""
    chunks: list[list[str]] = []
    size = 0
    for sentence in sentences:
        if chunks and size + len(sentence) + 1 <= _MERGE_CHARS:
            chunks[-1].append(sentence)
            size += len(sentence) + 1
        else:
            chunks.append([sentence])
            size = len(sentence)
    return chunks


def _same(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= 0.8


def _speakers(entries: Sequence[ParsedEntry]) -> tuple[frozenset[str], frozenset[str]]:
    """The speakers named at the start of the messages shown (``Caroline: ...``), and
    their names' words in lower case. A label (``Fixed: ...``, ``Update: ...``) is no
    speaker."""
    found: set[str] = set()
    for entry in entries:
        named = _SPEAKER.match(message_moment(entry.text, entry.timestamp)[0])
        if named and named["name"].lower() not in _LABELS:
            found.add(named["name"])
    names = frozenset(found)
    words = {"user", "assistant", "tool"}
    for name in names:
        words.update(part.lower() for part in name.split())
    return names, frozenset(words)


def extract_observations(entries: Sequence[ParsedEntry]) -> list[dict[str, Any]]:
    """The offline observer's observations (tool-argument shape) for the entries shown."""
    names, speakers = _speakers(entries)
    merged: list[_Draft] = []
    for entry in entries:
        for draft in _message_drafts(entry, names, speakers):
            twin = next(
                (d for d in merged if d.kind == draft.kind and _same(d.words, draft.words)), None
            )
            if twin is not None:
                twin.sources.extend(s for s in draft.sources if s not in twin.sources)
                continue
            # The same speaker's last statement, a question or two back at most: one
            # observation for what they told in one go.
            last = next(
                (
                    d
                    for d in reversed(merged[-3:])
                    if d.kind == "fact" and d.speaker == draft.speaker
                ),
                None,
            )
            # Only past the other's questions: a statement of theirs in between is a turn
            # of its own, and joining across it would tie unrelated messages together
            # (revoking one would withhold the others' facts).
            if last is not None and any(
                d.speaker != draft.speaker and d.kind != "question"
                for d in merged[merged.index(last) + 1 :]
            ):
                last = None
            if (
                last is not None
                and draft.kind == "fact"
                and last.sources[-1] != draft.sources[0]
                and len(last.text) + len(draft.text) <= _MERGE_CHARS
            ):
                last.sentences.extend(draft.sentences)
                last.sources.extend(s for s in draft.sources if s not in last.sources)
                last.words = last.words | draft.words
                last.referenced = last.referenced or draft.referenced
                if _RANK[draft.priority] > _RANK[last.priority]:
                    last.priority = draft.priority
                continue
            merged.append(draft)
    return [d.item() for d in merged]
