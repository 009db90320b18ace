"""The vocabulary's special ids of treelstm.pytorch, unchanged.

Source: https://github.com/dasguptar/treelstm.pytorch @ 228a314add09fc7f39ea752aa7b1fcf756cfe277, treelstm/Constants.py.
Copyright (c) 2017 Riddhiman Dasgupta, MIT License (text: ports/LICENSE-treelstm.pytorch).
"""
PAD = 0
UNK = 1
BOS = 2
EOS = 3

PAD_WORD = '<blank>'
UNK_WORD = '<unk>'
BOS_WORD = '<s>'
EOS_WORD = '</s>'
