"""Two tiny models of different architectures (BERT, DistilBERT), seed 0, saved as folders with the embedded tokenizer."""
import sys
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

from bertattn_bench.runner.architectures import Arch
from bertattn_bench.engine.model import embedded_model_path

out = Path(sys.argv[1])
tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))
for arch, name in ((Arch("BERT", "bert", dict(max_position_embeddings=130)), "tiny-bert"),
                   (Arch("DistilBERT", "distilbert", dict(max_position_embeddings=130)), "tiny-distilbert")):
    torch.manual_seed(0)
    model = AutoModel.from_config(arch.config(tok.vocab_size))
    model.save_pretrained(out / name)
    tok.save_pretrained(out / name)
    print(out / name, sum(p.numel() for p in model.parameters()), "parameters")
