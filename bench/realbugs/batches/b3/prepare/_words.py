"""The synthetic word list shared by this batch's prepare helpers (tokenizer and records).

tlint-authored (bench/realbugs/batches/b3): consonant-vowel syllable pairs, deterministic, so a
tokenizer written by `chat_tokenizer.py` covers every word `text_records.py` writes.
"""
from __future__ import annotations

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
ROLES = ["system", "user", "assistant"]
PUNCT = [".", ",", "?", "!", ":", "=", "+", "-", "*", "(", ")"]
DIGITS = [str(i) for i in range(10)]


def words(n: int = 200) -> list[str]:
    """The first N two-syllable words (at most 4,900)."""
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    out = [a + b for a in syllables for b in syllables]
    return out[:n]
