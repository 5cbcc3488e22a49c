#!/usr/bin/env python3
"""Chat examples about passages of the four books, for the chat demonstration.

  books_chat.py make BOOKS_DIR OUT_DIR   writes OUT_DIR/books_chat.jsonl (training),
                                         OUT_DIR/books_chat_test.jsonl (held-out passages),
                                         OUT_DIR/books_pairs.jsonl (dpo's preference pairs) and
                                         OUT_DIR/books_prompts.jsonl (grpo's prompts)
  books_chat.py score TEST.jsonl ANSWERS  counts the answers that say what the reference says
                                         (ANSWERS: `recipe run chat --set questions=TEST.jsonl`'s
                                         output, one {"answer": ...} line per question, in order)

Each example is one conversation: a passage of 40-110 words and a question
about it, answered from the passage: which book it comes from, or who wrote
it. Every tenth passage is held out. Each training conversation also makes
a preference pair for dpo: its question, the right answer chosen, the same
answer naming another book and author, up to its first wrong word,
rejected; and a prompt for grpo: its question, with the book and the author
its reward checks the answer against. The output is
the same on every machine (no randomness), so the figures in the README can
be measured again.
"""
import json
import re
import sys
from pathlib import Path

BOOKS = {
    "mobydick.txt": ("Moby Dick", "Herman Melville"),
    "pg1661.txt": ("The Adventures of Sherlock Holmes", "Arthur Conan Doyle"),
    "Mark.Twain-Tom.Sawyer.txt": ("The Adventures of Tom Sawyer", "Mark Twain"),
    "Isaac.Newton-Opticks.txt": ("Opticks", "Isaac Newton"),
}
PER_BOOK = 400  # passages per book, so that no book's answer is a better guess than another's


def passages(text):
    """Running prose in pieces of whole sentences, 40-110 words each (long paragraphs give several),
    mostly letters, no licence or transcriber's text."""
    for block in re.split(r"\n\s*\n", text):
        joined = " ".join(block.split())
        if re.search(r"Gutenberg|http|www\.|\[Illustration|Transcriber", joined, re.I):
            continue
        if sum(c.isalpha() for c in joined) < 0.7 * len(joined):
            continue
        piece = []
        for sentence in re.split(r"(?<=[.!?])\s+", joined):
            piece += sentence.split()
            if len(piece) >= 40:
                if len(piece) <= 110:
                    yield " ".join(piece)
                piece = []


def answer(title, author, kind):
    return f"It is from {title}, by {author}." if kind == 0 else f"{author} wrote it, in {title}."


def example(passage, title, author, kind):
    question = "Which book is this passage from?" if kind == 0 else "Who wrote this passage?"
    return {"messages": [{"role": "user", "content": f"{question}\n\n{passage}"},
                         {"role": "assistant", "content": answer(title, author, kind)}]}


def pair(ex, wrong, kind):
    """The conversation's question; its answer chosen; rejected, the same answer naming `wrong` (a title, author)
    up to its first wrong word. What follows that word would be right after it ("Arthur" then "Conan Doyle"):
    left in, DPO would push it down too and teach the model to mix names."""
    right, bad = ex["messages"][1]["content"].split(" "), answer(*wrong, kind).split(" ")
    first = next(i for i, (a, b) in enumerate(zip(right, bad)) if a != b)
    return {"prompt": ex["messages"][:1], "chosen": ex["messages"][1:],
            "rejected": [{"role": "assistant", "content": " ".join(bad[:first + 1])}]}


def prompt(ex, title, author):
    """The conversation's question, and what grpo's reward (contains, answer_field=book,author) looks for."""
    return {"prompt": ex["messages"][:1], "book": title, "author": author}


def make(books_dir, out_dir):
    train, test, pairs, prompts = [], [], [], []
    names = list(BOOKS.values())
    for b, (name, (title, author)) in enumerate(BOOKS.items()):
        found = list(passages((Path(books_dir) / name).read_text(encoding="utf-8")))
        if len(found) < PER_BOOK:
            sys.exit(f"{name}: {len(found)} passages of running prose, {PER_BOOK} needed")
        step = len(found) / PER_BOOK  # spread over the whole book
        for i in range(PER_BOOK):
            kind = (i + i // 10) % 2  # both kinds held out
            ex = example(found[int(i * step)], title, author, kind)
            (test if i % 10 == 9 else train).append(ex)
            if i % 10 != 9:  # each other book in turn the wrong one
                pairs.append(pair(ex, names[(b + 1 + i % 3) % len(names)], kind))
                prompts.append(prompt(ex, title, author))
    # Books interleaved, so that any prefix of the file has all four.
    order = lambda xs: [xs[b * (len(xs) // 4) + i] for i in range(len(xs) // 4) for b in range(4)]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for path, rows in ((out / "books_chat.jsonl", order(train)), (out / "books_chat_test.jsonl", order(test)),
                       (out / "books_pairs.jsonl", order(pairs)), (out / "books_prompts.jsonl", order(prompts))):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"{path}: {len(rows)} lines")


def score(test_file, answers_file):
    """An answer is right when it names the reference's book (or author) and no other."""
    tests = [json.loads(line) for line in Path(test_file).read_text(encoding="utf-8").splitlines()]
    answers = [json.loads(line)["answer"] for line in Path(answers_file).read_text(encoding="utf-8").splitlines()
               if line.startswith('{"answer"')]
    if len(answers) != len(tests):
        sys.exit(f"{answers_file}: {len(answers)} answers for {len(tests)} questions")
    right = {"book": [0, 0], "author": [0, 0]}
    for t, answer in zip(tests, answers):
        question, reference = t["messages"][0]["content"], t["messages"][1]["content"]
        kind = "book" if question.startswith("Which book") else "author"
        names = [title if kind == "book" else author for title, author in BOOKS.values()]
        key = [name for name in names if name in reference][0]
        right[kind][0] += key in answer and all(other not in answer for other in names if other != key)
        right[kind][1] += 1
    for kind, (ok, n) in right.items():
        print(f"{kind}: {ok}/{n} right ({100 * ok / max(n, 1):.0f}%; chance 25%)")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
