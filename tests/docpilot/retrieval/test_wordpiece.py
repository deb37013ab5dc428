"""BERT's uncased WordPiece tokenizer: normalisation, splits, pieces, and the reference tokenizer."""

from __future__ import annotations

import pytest

from docpilot.corpus.pages import load_corpus
from docpilot.retrieval.embedders import STATIC_MODEL
from docpilot.retrieval.wordpiece import WordPiece
from tests.conftest import DATA

TINY = ["[PAD]", "[UNK]", "un", "##aff", "##able", "aff", "cafe", "##s", "a", "b", "c", "!", ",", "_", "中"]


def test_words_are_lowercased_stripped_of_accents_and_split_at_punctuation():
    tokenizer = WordPiece(TINY)
    assert tokenizer.words("Café, NAÏVE!") == ["cafe", ",", "naive", "!"]
    # Underscores and dollar signs are punctuation to BERT, so identifiers split at them.
    assert tokenizer.words("log_prints=$x") == ["log", "_", "prints", "=", "$", "x"]
    # CJK ideographs stand alone; control characters vanish; any whitespace separates.
    assert tokenizer.words("a中b\x00c\u200b\td") == ["a", "中", "bc", "d"]


def test_pieces_are_the_longest_the_vocabulary_holds():
    tokenizer = WordPiece(TINY)
    ids = {token: i for i, token in enumerate(TINY)}
    assert tokenizer.ids("unaffable cafes") == [ids["un"], ids["##aff"], ids["##able"], ids["cafe"], ids["##s"]]
    # A word the pieces cannot spell, or one over 100 characters, is one unknown token.
    assert tokenizer.ids("xyz") == [tokenizer.unknown_id]
    assert tokenizer.ids("a" * 101) == [tokenizer.unknown_id]
    assert tokenizer.ids("abc abc abc", limit=4) == tokenizer.ids("abc abc abc")[:4]


def test_a_vocabulary_without_an_unknown_token_is_refused():
    with pytest.raises(ValueError, match=r"\[UNK\]"):
        WordPiece(["a", "b"])


def test_the_shipped_vocabulary_splits_text_as_the_reference_tokenizer_does():
    tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers package is not installed")
    vocabulary = (STATIC_MODEL / "vocab.txt").read_text(encoding="utf-8").splitlines()
    # The reference is Hugging Face's own pipeline for uncased BERT, built piece by piece
    # because the shipped vocabulary has no [CLS] or [SEP] for its convenience class.
    wordpiece = tokenizers.models.WordPiece(
        {token: i for i, token in enumerate(vocabulary)}, unk_token="[UNK]", max_input_chars_per_word=100
    )
    reference = tokenizers.Tokenizer(wordpiece)
    reference.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True, strip_accents=None)
    reference.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    ours = WordPiece(vocabulary)
    corpus = load_corpus(DATA / "retrieval" / "docs")
    texts = [chunk.text for chunk in corpus.chunks]
    texts += ["Ünïcödé naïve — “quotes” 中文 x\u00a0y"]
    texts += ["prefect.yaml: `cache_expiration=timedelta(days=1)`"]
    for text in texts:
        assert ours.ids(text) == reference.encode(text, add_special_tokens=False).ids, text
