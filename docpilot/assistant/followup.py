"""What a follow-up question is searched with: the question, and the subject the conversation opened with.

In a chat the second question leans on the first ("How do I clear the stage cache?",
then "And does that drop the index too?"): asked alone, it names little the docs could
be found by. ``retrieval_query`` rewrites it, deterministically and without a model,
into the text the retriever ranks with; the model still reads the question as asked.
The rule, and what it was measured against, is in docs/retrieval.md#follow-ups.
"""

from __future__ import annotations

from collections.abc import Sequence

from docpilot.retrieval.tokens import terms, words


def retrieval_query(question: str, earlier: Sequence[tuple[str, str | None]]) -> str:
    """The text a turn is retrieved with: the question, then the new content words of the conversation's first question.

    ``earlier`` holds the conversation's turns before this one as (question, answer)
    pairs, first first. The rule:

    - a first turn (no earlier turns) is searched with its question unchanged;
    - a follow-up is searched with its question followed by the content words of the
      first question of the conversation (lowercased, stop words and question words
      dropped, as the retriever drops them) that the follow-up does not already hold
      (compared stemmed), each once, in their order.

    Only the first question is read: the later turns and every answer are left out. A
    conversation's subject is mostly set by its opening question, while a later one is
    often itself a bare follow-up ("Can I add one from inside a dependency too?"), and
    an answer would make a follow-up's ranking depend on the model's reply, so a ranking
    could no longer be computed, cached or gated without a model.
    """
    if not earlier:
        return question
    have = set(terms(question))
    added: list[str] = []
    for word in words(earlier[0][0]):
        stem = terms(word)
        if stem and stem[0] not in have:
            have.add(stem[0])
            added.append(word)
    return f"{question} {' '.join(added)}" if added else question
