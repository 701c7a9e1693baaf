"""A fixed, seeded corpus of English-like texts for throughput benchmarks (no downloads).

``build_corpus(count, seed)`` always returns the same texts for the same arguments: each
text has between ``MIN_WORDS`` and ``MAX_WORDS`` words drawn from ``WORDS`` with
``random.Random(seed)``. Lengths are log-uniform, so most texts are short (a query, a
title, a sentence) and a tail is paragraph-sized, as in a typical retrieval corpus.

    .venv/bin/python -m benchmarks.corpus      # prints a summary of the default corpus
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

MIN_WORDS = 5
MAX_WORDS = 200
DEFAULT_COUNT = 2000
DEFAULT_SEED = 20240117

WORDS = tuple(
    """
    the of and to in is was for on that with as by at from this be are or it an which have has
    not but were had their they one all been its also more new first who can than other some
    there into only after time two over most these may when about would such her she him his we
    our you your them then any each between both under while where those through during before
    invoice payment total due amount balance account customer supplier order delivery shipment
    contract agreement service support request report revenue growth quarter year month week day
    market price cost budget forecast sales team project meeting schedule office building floor
    lunch cafeteria weekday morning evening policy security access password network server client
    model data query passage document search index vector embedding score rank result answer
    question system process method analysis study research paper author title section chapter
    table figure value number percent rate level region country city street address company
    corporation group manager director engineer analyst student teacher doctor patient hospital
    health medicine treatment water energy power light heat weather rain wind river mountain
    forest garden house room door window kitchen table chair book music film game sport player
    match season league club history science nature animal plant food bread coffee tea milk
    travel flight train station airport hotel ticket booking reservation holiday family friend
    child parent people person life world state government law court judge rule right public
    private local national international global small large long short high low early late
    good better best bad important possible available different similar recent current common
    open closed free full empty simple complex quick slow fast safe strong weak clear final
    make made take took give gave find found know known think thought see seen come came use
    used work worked call called show shown provide provided include included require required
    create created develop developed increase increased reduce reduced report reported pay paid
    send sent receive received review reviewed approve approved update updated release released
    acme globex initech umbrella stark wayne hooli contoso fabrikam northwind tailspin litware
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday euro dollar pound yen franc
    """.split()
)


def text_lengths(count: int, seed: int) -> list[int]:
    """Word counts, log-uniform on [MIN_WORDS, MAX_WORDS]."""
    rng = random.Random(seed)
    lo, hi = math.log(MIN_WORDS), math.log(MAX_WORDS + 1)
    return [min(MAX_WORDS, int(math.exp(rng.uniform(lo, hi)))) for _ in range(count)]


def build_corpus(count: int = DEFAULT_COUNT, seed: int = DEFAULT_SEED) -> list[str]:
    """``count`` deterministic texts of MIN_WORDS..MAX_WORDS words (sentences with some numbers)."""
    rng = random.Random(seed + 1)
    texts = []
    for length in text_lengths(count, seed):
        words: list[str] = []
        sentence = 0
        for _ in range(length):
            word = str(rng.randint(1, 9999)) if rng.random() < 0.04 else rng.choice(WORDS)
            if sentence == 0:
                word = word.capitalize()
            words.append(word)
            sentence += 1
            if sentence >= 6 and rng.random() < 0.12:
                words[-1] += "."
                sentence = 0
        if not words[-1].endswith("."):
            words[-1] += "."
        texts.append(" ".join(words))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args()
    texts = build_corpus(args.count, args.seed)
    lengths = [len(t.split()) for t in texts]
    print(
        f"{len(texts)} texts, words min {min(lengths)} median {statistics.median(lengths):.0f} "
        f"mean {statistics.mean(lengths):.1f} max {max(lengths)}, total {sum(lengths)} words"
    )
    print("first:", texts[0][:200])


if __name__ == "__main__":
    main()
