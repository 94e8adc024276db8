"""The character-level vocabulary stored in every exported GGUF (SentencePiece-style "llama"
tokenizer: one token per character, so no merge ever applies)."""
import tasks

UNK, BOS, EOS = 0, 1, 2
SPECIALS = ["<unk>", "<s>", "</s>"]
MASK_TEXT = "<|mdm_mask|>"
CHARS = tasks.alphabet()
TOKENS = SPECIALS + CHARS
CHAR_ID = {c: i + len(SPECIALS) for i, c in enumerate(CHARS)}
TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL = 1, 2, 3


def tokens_for(arch):
    """Token texts; llada appends its mask token as the last id."""
    return TOKENS + ([MASK_TEXT] if arch == "llada" else [])


def n_vocab(arch):
    return len(tokens_for(arch))


def mask_id(arch):
    return len(TOKENS) if arch == "llada" else None


def encode(text):
    return [CHAR_ID.get(c, UNK) for c in text]


def decode(ids):
    out = []
    for i in ids:
        if i == EOS:
            break
        if i >= len(SPECIALS) and i < len(TOKENS):
            out.append(TOKENS[i])
    return "".join(out)
