#!/usr/bin/env python3
"""Writes a tiny random-weight llama-architecture GGUF that llama.cpp's llama-server loads.

No download: the weights are seeded random numbers, the tokenizer is a small SentencePiece-style
("llama") vocabulary built here: control tokens, the 256 byte-fallback tokens <0x00>..<0xFF>, the
printable ASCII characters with and without the word-start marker, and a few common words. The
chat template is ChatML, whose <|im_start|>/<|im_end|> are control tokens of the vocabulary.

The model is meant for measuring a client against a real server, not for its text: it is a
couple of layers of width 64, so a CPU decodes hundreds to thousands of tokens a second.

Usage: make_tiny_gguf.py OUT.gguf [--seed N]
"""

import argparse
import string

import numpy as np
from gguf import GGUFWriter, TokenType

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 4
N_LAYER = 2
N_FF = 128
N_CTX = 8192

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

WORDS = (
    "the of and to in is you that it he was for on are as with his they at be this have from "
    "or one had by word but not what all were we when your can said there use an each which "
    "she do how their if will up other about out many then them these so some her would make "
    "like him into time has look two more write go see number no way could people my than "
    "first water been call who oil its now find long down day did get come made may part "
    "hello world token stream bench server model answer question"
).split()


def vocab():
    """(tokens, scores, types) of the vocabulary; ids 0..4 are unk, bos, eos, im_start, im_end."""
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL, TokenType.CONTROL, TokenType.CONTROL]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(TokenType.BYTE)
    pieces = ["\u2581"]
    printable = [c for c in string.printable if c not in " \t\n\r\x0b\x0c"]
    pieces += printable
    pieces += ["\u2581" + c for c in printable]
    pieces += ["\u2581" + w for w in WORDS]
    seen = set(tokens)
    for p in pieces:
        if p not in seen:
            seen.add(p)
            tokens.append(p)
            types.append(TokenType.NORMAL)
    # SentencePiece merges prefer higher scores: longer pieces score higher, so words stay whole.
    scores = [0.0 if t != TokenType.NORMAL else -1000.0 + 10.0 * len(tok) for tok, t in zip(tokens, types)]
    return tokens, scores, types


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=9)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    tokens, scores, types = vocab()
    n_vocab = len(tokens)

    def w(*shape, scale=0.05):
        # numpy shape is (rows, cols) = (out, in); GGUF stores the reversed dims llama.cpp expects.
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    ones = np.ones(N_EMBD, dtype=np.float32)

    gw = GGUFWriter(args.out, "llama")
    gw.add_name("spark-bench tiny random llama")
    gw.add_context_length(N_CTX)
    gw.add_embedding_length(N_EMBD)
    gw.add_block_count(N_LAYER)
    gw.add_feed_forward_length(N_FF)
    gw.add_head_count(N_HEAD)
    gw.add_head_count_kv(N_HEAD_KV)
    gw.add_rope_dimension_count(N_EMBD // N_HEAD)
    gw.add_layer_norm_rms_eps(1e-5)
    gw.add_vocab_size(n_vocab)
    gw.add_file_type(0)  # all F32

    gw.add_tokenizer_model("llama")
    gw.add_token_list(tokens)
    gw.add_token_scores(scores)
    gw.add_token_types(types)
    gw.add_unk_token_id(0)
    gw.add_bos_token_id(1)
    gw.add_eos_token_id(2)
    gw.add_eot_token_id(4)
    gw.add_add_bos_token(True)
    gw.add_add_eos_token(False)
    gw.add_add_space_prefix(True)
    gw.add_chat_template(CHATML)

    gw.add_tensor("token_embd.weight", w(n_vocab, N_EMBD, scale=1.0))
    for i in range(N_LAYER):
        p = f"blk.{i}."
        gw.add_tensor(p + "attn_norm.weight", ones)
        gw.add_tensor(p + "attn_q.weight", w(N_EMBD, N_EMBD))
        gw.add_tensor(p + "attn_k.weight", w(N_EMBD * N_HEAD_KV // N_HEAD, N_EMBD))
        gw.add_tensor(p + "attn_v.weight", w(N_EMBD * N_HEAD_KV // N_HEAD, N_EMBD))
        gw.add_tensor(p + "attn_output.weight", w(N_EMBD, N_EMBD))
        gw.add_tensor(p + "ffn_norm.weight", ones)
        gw.add_tensor(p + "ffn_gate.weight", w(N_FF, N_EMBD))
        gw.add_tensor(p + "ffn_up.weight", w(N_FF, N_EMBD))
        gw.add_tensor(p + "ffn_down.weight", w(N_EMBD, N_FF))
    gw.add_tensor("output_norm.weight", ones)
    gw.add_tensor("output.weight", w(n_vocab, N_EMBD, scale=0.5))

    gw.write_header_to_file()
    gw.write_kv_data_to_file()
    gw.write_tensors_to_file()
    gw.close()
    print(f"wrote {args.out}: llama, {N_LAYER} layers, n_embd {N_EMBD}, vocab {n_vocab}, seed {args.seed}")


if __name__ == "__main__":
    main()
