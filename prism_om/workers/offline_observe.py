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
  (:mod:`.offline_dates`), only when certain and in the unit they name (a day, ``the week
  of`` its Monday, a month, a year); the resolution is written into the text and the first
  day named becomes ``referencedDate``. Written dates are never resolved again.
* **Tool calls and results are notes** (:mod:`.offline_tools`): the tool and its key
  argument (``Assistant called bash: `git diff```), a result's outcome (``read 19 lines of
  fib.py``, ``24 passed``, ``listed 65 paths (60 under .git/objects, ...)``), or its exit
  status, error type, message and where it was raised (``Tool error: KeyError:
  'currency' at billing/export.py line 41``). A shell command the user ran (``$ cmd`` and
  its output) is ``User ran `cmd`: ...``, never a statement of theirs.
* **Verbatim spans stay verbatim** (:mod:`.offline_verbatim`): code, commands, paths,
  backticked text and photo captions are held out of the rewriting.
* **Names survive**: only a speaker's name closing a sentence is an address (", Melanie!").
* **Replies keep their subject**: "Yep!" after the other's question that the memory
  leaves out says what it answers.
* **Observations are dated** by the day each message was written (a date header in its
  text, else its timestamp), and a statement never joins one of another day.
* **Repeats collapse, distinct facts never merge**: a statement every content word of
  which an earlier one of the batch holds adds its source to that observation; a repeated
  tool line collapses into the run it repeats with its count.
* Observations come in the order of their newest source, so a run a cap stops has recorded
  everything up to the newest message it cites.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from .offline_dates import message_moment, resolve_dates
from .offline_reflect import telegraph
from .offline_tools import ToolCallNote, is_shell_run, summarize_tool_call, summarize_tool_result
from .offline_verbatim import Verbatim
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
# A name said in address ("Thanks, Melanie!"): a comma, one capitalised word, and the end of
# the sentence. A name between commas ("my home country, Sweden, ...") is part of the clause.
_VOCATIVE = re.compile(r",\s*(?P<name>[A-Z][a-z]+)(?=\s*[!.?]*\s*$)")
_BY_THE_WAY = re.compile(r",?\s*(?:by the way|btw)(?=[.!?]*$)", re.I)
_TIMES = re.compile(r" \(\d+ times\)$")
_ANSWER = re.compile(
    r"^(?P<word>yes|yeah|yep|yup|no|nope|nah|sure|definitely|absolutely|of course|not really|"
    r"exactly|right|correct|indeed)\b[\s,!.:;-]*",
    re.IGNORECASE,
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
_NUMBER_WORDS: Final = frozenset(
    "one two three four five six seven eight nine ten first second third next last".split()
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
    verbatim: Verbatim
    observed: str | None = None
    """When the message says it was written (a date header), if not its timestamp."""
    day: str = ""
    """The day the message was written: a statement never joins one of another day."""
    words: frozenset[str] = field(default_factory=frozenset)
    repeats: int = 1

    @property
    def text(self) -> str:
        # A sentence ending in code or a command has no full stop of its own to end it.
        body = " ".join(
            f"{sentence};"
            if self.verbatim.ends_with_code(sentence) and n < len(self.sentences) - 1
            else sentence
            for n, sentence in enumerate(self.sentences)
        )
        if self.kind == "tool":
            text = body
        else:
            told = telegraph(body)
            # A closing code block or command needs no full stop after it.
            text = f"{self.speaker}: {told}{'' if self.verbatim.ends_with_code(told) else '.'}"
        if len(text) > _MAX_TEXT:
            # Only ever a sentence with no clause to split at: cut at a space, so a
            # verbatim span (a placeholder here) is kept whole or not at all.
            cut = text.rfind(" ", 0, _MAX_TEXT - 1)
            text = text[: cut if cut > 0 else _MAX_TEXT - 1].rstrip() + "…"
        if self.repeats > 1:
            text += f" ({self.repeats} times)"
        return self.verbatim.restore(text)

    def item(self) -> dict[str, Any]:
        found: dict[str, Any] = {"text": self.text, "sourceEntryIds": list(self.sources)}
        if self.priority != "medium":
            found["priority"] = self.priority
        if self.referenced is not None:
            found["referencedDate"] = self.referenced
        if self.observed is not None:
            found["observedAt"] = self.observed
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


def _clean(sentence: str, speakers: frozenset[str] = frozenset(), *, any_name: bool = False) -> str:
    """Without leading interjections and a speaker's name said in address (", Melanie!").

    Only a name closing the sentence is an address; with ``any_name`` every such name is
    taken for one (to tell chatter: "Thanks, Dana!"), else only the speakers' names, so
    "I grew up in my home country, Sweden." keeps Sweden.
    """
    text = " ".join(sentence.split())
    text = _VOCATIVE.sub(lambda m: "" if any_name or m["name"].lower() in speakers else m[0], text)
    text = _BY_THE_WAY.sub("", text)
    text = _LEAD.sub("", text).strip()
    text = re.sub(r"([!?])\1+", r"\1", text)
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    return text


def is_chatter(sentence: str, speakers: frozenset[str] = frozenset()) -> bool:
    """True for a greeting, thanks, acknowledgement or reaction: no fact in it.

    A fact needs a number, a name other than the speakers' (who are addressed in
    greetings), a verbatim span (code, a command, a path) or a word outside the stopwords
    and the vocabulary of small talk.
    """
    clean = _clean(sentence, speakers, any_name=True)
    if not clean:
        return True
    if Verbatim.holds(clean) or any(ch.isdigit() for ch in clean) or _names(clean, speakers):
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


def _split(text: str) -> list[str]:
    return [" ".join(s.split()) for s in _SENTENCE.split(text) if s and s.strip()]


def _weak(sentence: str, speakers: frozenset[str]) -> bool:
    """A remark with one content word and no number, name, date, decision or verbatim span
    ("It was so powerful."): an aside, not a fact worth a line of memory."""
    if Verbatim.holds(sentence):
        return False
    if _sentence_priority(sentence, resolve_dates(sentence, None).referenced, speakers) == "high":
        return False
    return len(_content_words(sentence, speakers)) < 2


def _sentence_priority(sentence: str, referenced: str | None, speakers: frozenset[str]) -> str:
    # Resolved dates and verbatim spans are placeholders here: ``referenced`` stands for a
    # date, and the placeholders' digits are no number of the sentence.
    sentence = Verbatim.without_spans(sentence)
    words = set(_words(sentence))
    strong = (
        any(ch.isdigit() for ch in sentence)
        or referenced is not None
        or bool(_names(sentence, speakers))
        or bool(words & _STRONG)
        or "going to" in sentence.lower()
    )
    return "high" if strong else "medium"


def _collapse_repeats(text: str) -> str:
    """Each run of identical lines once, with its count."""
    out: list[str] = []
    count = 0
    for line in text.split("\n"):
        if out and line.strip() and line == _TIMES.sub("", out[-1]) and count:
            count += 1
            out[-1] = f"{line} ({count} times)"
            continue
        out.append(line)
        count = 1
    return "\n".join(out)


def _long_pieces(sentence: str) -> list[str]:
    """A sentence longer than one observation, split at its clauses rather than cut."""
    if len(sentence) <= _MERGE_CHARS:
        return [sentence]
    pieces: list[str] = []
    for clause in re.split(r"(?<=[,;:])\s+", sentence):
        if pieces and len(pieces[-1]) + len(clause) + 1 <= _MERGE_CHARS:
            pieces[-1] += " " + clause
        else:
            pieces.append(clause)
    return pieces


@dataclass
class _Context:
    """What one observer run carries from message to message."""

    names: frozenset[str]
    speakers: frozenset[str]
    verbatim: Verbatim
    calls: list[ToolCallNote] = field(default_factory=list)
    """Tool calls not yet answered, oldest first: the next tool result answers the first."""
    asked: tuple[str, str] | None = None
    """The last message's speaker and its closing question, when it ended in one that the
    memory does not keep (it names nothing): a reply's subject."""


def _observed(text: str, timestamp: str, moment: datetime | None) -> str | None:
    """The moment a date header gives, when it is not the entry's own timestamp."""
    if moment is None or not text:
        return None
    stamped = moment.replace(tzinfo=None).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return None if stamped[:19] == timestamp[:19] else stamped


def _message_drafts(entry: ParsedEntry, ctx: _Context) -> list[_Draft]:
    raw_text, moment = message_moment(entry.text, entry.timestamp)
    observed = _observed(raw_text if raw_text != entry.text else "", entry.timestamp, moment)
    speaker = {"user": "User", "assistant": "Assistant", "tool": "Tool"}.get(entry.role, "")
    text = raw_text
    named = _SPEAKER.match(text)
    if named and named["name"] in ctx.names:
        speaker, text = named["name"], named["rest"]
    v, speakers = ctx.verbatim, ctx.speakers

    def draft(
        sentences: list[str], priority: str, kind: str, referenced: str | None = None
    ) -> _Draft:
        day = moment.date().isoformat() if moment is not None else entry.timestamp[:10]
        return _Draft(speaker, [entry.id], sentences, priority, referenced, kind, v, observed, day)

    asked, ctx.asked = ctx.asked, None
    if entry.role == "tool":
        call = ctx.calls.pop(0) if ctx.calls else None
        summary, priority = summarize_tool_result(text, call)
        return [draft([v.protect(summary)], priority, "tool")]
    if entry.role == "user" and is_shell_run(text):
        # A command the user ran and its output (pi's bashExecution): an action and its
        # outcome, never a statement of the user's; at most medium.
        command, _, output = text[2:].partition("\n")
        outcome, priority = summarize_tool_result(output)
        outcome = outcome.split(": ", 1)[1] if ": " in outcome else outcome
        line = f"{speaker} ran `{command.strip()}`: {outcome}"
        return [draft([v.protect(line)], "medium" if priority == "high" else "low", "tool")]
    drafts: list[_Draft] = []
    prose: list[str] = []
    for line in text.split("\n"):
        call_match = _TOOL_CALL.match(line.strip())
        arguments: Any = None
        if call_match:
            try:
                arguments = json.loads(call_match["args"])
            except (json.JSONDecodeError, RecursionError):
                call_match = None
        if call_match:
            name = call_match["name"]
            ctx.calls.append(ToolCallNote(name, arguments))
            quiet = name.lower() in _QUIET_TOOLS
            summary = f"{speaker} {summarize_tool_call(name, arguments)}"
            drafts.append(draft([v.protect(summary)], "low" if quiet else "medium", "tool"))
        else:
            prose.append(line)
    if drafts:
        # A new turn of calls: results answer these, not calls an earlier turn left open.
        ctx.calls = ctx.calls[-sum(1 for d in drafts if d.kind == "tool") :]
    body = v.protect(_collapse_repeats("\n".join(prose)))
    facts: list[str] = []
    questions: list[str] = []
    priority, referenced = "medium", None
    sentences = _split(body)
    if asked is not None and asked[0] != speaker and sentences:
        answer = _ANSWER.match(sentences[0])
        if answer:
            # "Yep!" answers the other's question the memory leaves out: say what to.
            word = answer["word"].capitalize()
            facts.append(f"{word}, to {asked[0]}'s {v.hold(chr(34) + asked[1] + chr(34))}")
    for raw in sentences:
        if raw.startswith(("[… truncated", "[aborted]")) or is_chatter(raw, speakers):
            continue
        sentence = _clean(raw, speakers)
        if not sentence.endswith("?") and _weak(sentence, speakers):
            continue
        dated = resolve_dates(_compact(sentence), moment, v.hold)
        if sentence.endswith("?"):
            # A question keeps only what it names: "How old is Biscuit?", not "Who with?".
            bare = Verbatim.without_spans(sentence)
            if _names(bare, speakers) or any(ch.isdigit() for ch in bare):
                questions.append(dated.text)
            continue
        facts.extend(_long_pieces(dated.text))
        referenced = referenced or dated.referenced
        if dated.dated or _sentence_priority(dated.text, dated.referenced, speakers) == "high":
            priority = "high"
    if sentences and sentences[-1].endswith("?") and not questions:
        last = v.restore(_clean(sentences[-1], speakers))
        if len(last) <= 160:
            ctx.asked = (speaker, last)
    for chunk in _chunks(facts):
        drafts.append(draft(chunk, priority, "fact", referenced))
    if questions:
        drafts.append(draft([f"asked {' '.join(questions)}"], "low", "question"))
    for made in drafts:
        made.words = _content_words(v.restore(" ".join(made.sentences)), speakers)
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


def _repeats(earlier: _Draft, draft: _Draft) -> bool:
    """Whether ``draft`` says nothing ``earlier`` does not: every content word of it is
    one of the earlier's. Distinct facts in similar messages ("locker 119's code word is
    amber-fox", "locker 120's ... blue-owl") differ in a word, so they are never merged."""
    if earlier.kind != draft.kind or not draft.words:
        return False
    if draft.kind == "tool":
        return _TIMES.sub("", earlier.text) == _TIMES.sub("", draft.text)
    return draft.words <= earlier.words


def _speakers(entries: Sequence[ParsedEntry]) -> tuple[frozenset[str], frozenset[str]]:
    """The speakers named at the start of the messages shown (``Caroline: ...``), and
    their names' words in lower case.

    A name that opens two messages or more is a speaker. One that opens a single message
    is one only when it reads as a name: capitalised words, none of them a label
    (``Fixed:``, ``Update:``), a word of chatter (``Understood:``) or a common word
    (``Two TODOs:``).
    """
    opened: dict[str, int] = {}
    for entry in entries:
        named = _SPEAKER.match(message_moment(entry.text, entry.timestamp)[0])
        if named and named["name"].lower() not in _LABELS:
            opened[named["name"]] = opened.get(named["name"], 0) + 1
    names = frozenset(name for name, count in opened.items() if count > 1 or _reads_as_name(name))
    words = {"user", "assistant", "tool"}
    for name in names:
        words.update(part.lower() for part in name.split())
    return names, frozenset(words)


def _reads_as_name(name: str) -> bool:
    common = _LABELS | _CHATTER | _STRONG | _STOP | _NUMBER_WORDS
    return all(
        part[:1].isupper() and part[1:].islower() and part.lower() not in common
        for part in name.split()
    )


def extract_observations(entries: Sequence[ParsedEntry]) -> list[dict[str, Any]]:
    """The offline observer's observations (tool-argument shape) for the entries shown.

    They come in the order of their newest source, so a run a cap stops after any of its
    calls has recorded every message up to the newest one it cites (coverage is earned).
    """
    names, speakers = _speakers(entries)
    ctx = _Context(names, speakers, Verbatim())
    position = {entry.id: index for index, entry in enumerate(entries)}
    merged: list[_Draft] = []
    # Who spoke, in order, including drafts absorbed into an earlier twin: a turn of the
    # other speaker ends a statement even when all it said was said before.
    turns: list[tuple[str, str]] = []
    last_turn: dict[int, int] = {}  # id(draft) -> index in turns of its newest part
    said: dict[str, list[frozenset[str]]] = {}  # speaker -> content words of each clause
    for entry in entries:
        for draft in _message_drafts(entry, ctx):
            if draft.kind == "fact":
                _drop_said_clauses(draft, said.setdefault(draft.speaker, []), speakers)
            turns.append((draft.speaker, draft.kind))
            # A repeated tool line collapses only into the run it repeats (the call and its
            # result just before): the same command run again later is a new event.
            near = merged[-2:] if draft.kind == "tool" else merged
            twin = next((d for d in near if _repeats(d, draft)), None)
            if twin is not None:
                twin.sources.extend(s for s in draft.sources if s not in twin.sources)
                if draft.kind == "tool":
                    twin.repeats += 1
                twin.observed = _later(twin.observed, draft.observed)
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
                speaker != draft.speaker and kind != "question"
                for speaker, kind in turns[last_turn[id(last)] + 1 : -1]
            ):
                last = None
            if (
                last is not None
                and draft.kind == "fact"
                and last.day == draft.day
                and last.sources[-1] != draft.sources[0]
                and len(last.text) + len(draft.text) <= _MERGE_CHARS
            ):
                last.sentences.extend(draft.sentences)
                last.sources.extend(s for s in draft.sources if s not in last.sources)
                last.words = last.words | draft.words
                last.referenced = last.referenced or draft.referenced
                last.observed = _later(last.observed, draft.observed)
                if _RANK[draft.priority] > _RANK[last.priority]:
                    last.priority = draft.priority
                last_turn[id(last)] = len(turns) - 1
                continue
            merged.append(draft)
            last_turn[id(draft)] = len(turns) - 1
    merged.sort(key=lambda d: max(position.get(s, -1) for s in d.sources))
    return [d.item() for d in merged]


_CLAUSE = re.compile(r"(?<=[,;:])\s+")


def _drop_said_clauses(draft: _Draft, said: list[frozenset[str]], speakers: frozenset[str]) -> None:
    """Leave out of ``draft`` each clause its speaker said before in the batch, word for
    word (the boilerplate of similar messages), when something of it remains.

    A clause goes only when every content word of it is in one earlier clause, so a clause
    with a new number, name or code word always stays: distinct facts are never lost.
    """
    kept_sentences: list[str] = []
    dropped = False
    new: list[frozenset[str]] = []
    for sentence in draft.sentences:
        kept: list[str] = []
        for clause in _CLAUSE.split(sentence):
            words = _content_words(draft.verbatim.restore(clause), speakers)
            if len(words) >= 2 and any(words <= earlier for earlier in said):
                dropped = True
                continue
            if words:
                new.append(words)
            kept.append(clause)
        if kept:
            kept_sentences.append(" ".join(kept).rstrip(",;:"))
    said.extend(new)
    if dropped and kept_sentences:
        draft.sentences = kept_sentences
        draft.words = _content_words(draft.verbatim.restore(" ".join(kept_sentences)), speakers)


def _later(a: str | None, b: str | None) -> str | None:
    return max(a, b) if a and b else a or b
