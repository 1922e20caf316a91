"""Greedy reference texts from llama2.c's run.c, outside the code under test.

models/stories260K/expected/ holds run.c's greedy continuation of "Once upon a time": the token
ids (.tokens) and the decoded text (.txt). A greedy request with max_tokens k must return the
decoding of the first k generated ids. This module decodes them with run.c's own rules from
tok512.bin (llama2.c's vocabulary file), and checks that all of them decode to the .txt.
"""

import os
import struct

PROMPT = "Once upon a time"


def _read_vocab(path):
    with open(path, "rb") as f:
        data = f.read()
    pieces = []
    off = 4  # int32 max_token_length
    while off < len(data):
        _score, length = struct.unpack_from("<fi", data, off)
        off += 8
        pieces.append(data[off:off + length])
        off += length
    return pieces


def _decode_piece(pieces, prev, token):
    # run.c decode(): drop the leading space after BOS; "<0xXX>" is a raw byte.
    piece = pieces[token]
    if prev == 1 and piece.startswith(b" "):
        piece = piece[1:]
    if len(piece) == 6 and piece.startswith(b"<0x") and piece.endswith(b">"):
        return bytes([int(piece[3:5], 16)])
    return piece


class Reference:
    """Expected completion text of "Once upon a time" for each max_tokens in 1..max_tokens()."""

    def __init__(self, repo_root):
        base = os.path.join(repo_root, "models", "stories260K")
        pieces = _read_vocab(os.path.join(base, "tok512.bin"))
        prompt_ids = seq = None
        with open(os.path.join(base, "expected", "greedy_once_upon_a_time_n64.tokens")) as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "PROMPT_TOKENS":
                    prompt_ids = [int(x) for x in fields[1:]]
                elif fields and fields[0] == "SEQ":
                    seq = [int(x) for x in fields[1:]]
        if not prompt_ids or not seq or seq[:len(prompt_ids)] != prompt_ids:
            raise ValueError("greedy_once_upon_a_time_n64.tokens: no PROMPT_TOKENS/SEQ lines")
        generated = seq[len(prompt_ids):]
        # The whole sequence must decode to run.c's printed text (which ends with a newline).
        whole = b"".join(_decode_piece(pieces, p, t) for p, t in zip(seq, seq[1:]))
        with open(os.path.join(base, "expected", "greedy_once_upon_a_time_n64.txt"), "rb") as f:
            txt = f.read()
        if whole + b"\n" != txt:
            raise ValueError("decoding the .tokens with tok512.bin does not give the .txt")
        if not whole.decode("utf-8").startswith(PROMPT):
            raise ValueError("the reference does not start with the prompt")
        self._texts = [""]
        acc = b""
        prev = prompt_ids[-1]
        for t in generated:
            acc += _decode_piece(pieces, prev, t)
            prev = t
            self._texts.append(acc.decode("utf-8"))

    def max_tokens(self):
        """The longest continuation with a known text (60)."""
        return len(self._texts) - 1

    def text(self, max_tokens):
        """The exact greedy completion text for `max_tokens` new tokens."""
        return self._texts[max_tokens]
