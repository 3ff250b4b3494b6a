"""Two tiny models of different architectures (BERT, DistilBERT), seed 0, saved as folders with the embedded tokenizer."""
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from bertattn_bench.engine.model import embedded_model_path

SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=130)  # the architecture matrix's tiny shape (tests/architecture_matrix.py)

out = Path(sys.argv[1])
tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))
for model_type, name in (("bert", "tiny-bert"), ("distilbert", "tiny-distilbert")):
    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.for_model(model_type, vocab_size=tok.vocab_size, **SHAPE))
    model.save_pretrained(out / name)
    tok.save_pretrained(out / name)
    print(out / name, sum(p.numel() for p in model.parameters()), "parameters")
