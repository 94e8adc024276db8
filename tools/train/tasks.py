"""Synthetic tasks with exact answers (Python standard library only: bench/eval.py imports it).

Every item is a prompt string and a reference answer string; the model sees
`<s>` + prompt + answer + `</s>` and must produce the answer then end (EOS). The
character-level tokenizer (vocab.py) has one token per character used here.

Evaluation items are split from training items by a hash of the prompt: a prompt whose
sha256 falls in the evaluation bucket is never used for training (`is_eval_prompt`), so
every evaluation prompt is unseen in training, whatever the seeds.
"""
import hashlib
import random

TASKS = ["add", "sort", "recall", "set", "brackets", "reverse"]
EVAL_BUCKETS = 8  # 1 prompt in 8 is reserved for evaluation

LETTERS = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
OPEN_TO_CLOSE = {"(": ")", "[": "]", "{": "}"}


def is_eval_prompt(prompt):
    return hashlib.sha256(prompt.encode("utf-8")).digest()[0] % EVAL_BUCKETS == 0


# ---------------------------------------------------------------- generators
# Each takes a random.Random and returns (prompt, answer). `hard` picks the evaluation
# shape (e.g. exactly 4-digit operands for addition); training mixes easier shapes in.

def gen_add(rng, hard):
    if hard:
        a, b = rng.randint(1000, 9999), rng.randint(1000, 9999)
    else:
        na, nb = rng.randint(1, 4), rng.randint(1, 4)
        a, b = rng.randint(0, 10 ** na - 1), rng.randint(0, 10 ** nb - 1)
    return f"{a}+{b}=", str(a + b)


def gen_sort(rng, hard):
    n = rng.randint(5, 10) if hard else rng.randint(2, 10)
    s = "".join(rng.choice(DIGITS) for _ in range(n))
    return f"sort:{s}=", "".join(sorted(s))


def gen_recall(rng, hard):
    n = rng.randint(5, 8) if hard else rng.randint(2, 8)
    keys = rng.sample(LETTERS, n)
    vals = [rng.choice(DIGITS) for _ in range(n)]
    q = rng.randrange(n)
    pairs = ",".join(f"{k}{v}" for k, v in zip(keys, vals))
    return f"kv:{pairs}?{keys[q]}=", vals[q]


def gen_set(rng, hard):
    n = rng.randint(4, 7) if hard else rng.randint(2, 7)
    items = rng.sample(LETTERS, n)
    shown = "".join(sorted(items))
    order = items[:]
    rng.shuffle(order)  # any order is right: training shows random ones
    return f"set:{shown}=", "".join(order)


def gen_brackets(rng, hard):
    # a random bracket string with some pairs closed inside, then the closing suffix
    depth_target = rng.randint(2, 6) if hard else rng.randint(1, 6)
    stack, s = [], []
    while len(stack) < depth_target or (len(s) < 4 and rng.random() < 0.5):
        if stack and rng.random() < 0.3:
            s.append(OPEN_TO_CLOSE[stack.pop()])
        else:
            o = rng.choice("([{")
            stack.append(o)
            s.append(o)
        if len(s) > 14:
            break
    if not stack:
        o = rng.choice("([{")
        stack.append(o)
        s.append(o)
    return "close:" + "".join(s) + "=", "".join(OPEN_TO_CLOSE[o] for o in reversed(stack))


def gen_reverse(rng, hard):
    n = rng.randint(5, 10) if hard else rng.randint(2, 10)
    s = "".join(rng.choice(LETTERS) for _ in range(n))
    return f"rev:{s}=", s[::-1]


GENERATORS = {"add": gen_add, "sort": gen_sort, "recall": gen_recall, "set": gen_set,
              "brackets": gen_brackets, "reverse": gen_reverse}


# ---------------------------------------------------------------- graders (exact)

def grade(task, prompt, reference, output):
    """True iff `output` (the completion text, stopped at EOS) is a right answer."""
    out = output.strip()
    if task == "set":
        shown = prompt[len("set:"):-1]
        return len(out) == len(shown) and sorted(out) == sorted(shown)
    return out == reference


# ---------------------------------------------------------------- item streams

def training_item(rng, task):
    """One training item (never an evaluation prompt); mixes easy and evaluation shapes."""
    while True:
        prompt, answer = GENERATORS[task](rng, rng.random() < 0.5)
        if not is_eval_prompt(prompt):
            return prompt, answer


def eval_items(task, n, seed=1234):
    """The first n distinct evaluation items of `task` for `seed` (deterministic)."""
    rng = random.Random(f"{seed}:{task}")
    seen, items = set(), []
    tries = 0
    while len(items) < n:
        tries += 1
        if tries > 1000 * (n + 10):
            raise RuntimeError(f"{task}: cannot find {n} distinct evaluation items")
        prompt, answer = GENERATORS[task](rng, True)
        if prompt in seen or not is_eval_prompt(prompt):
            continue
        seen.add(prompt)
        items.append({"task": task, "id": f"{task}-{len(items)}", "prompt": prompt,
                      "answer": answer})
    return items


def alphabet():
    """Every character a prompt or an answer can contain."""
    return sorted(set(DIGITS + LETTERS + "+=:,?()[]{}"))
