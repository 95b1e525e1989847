"""A randomly initialised causal LM (Llama architecture, ~0.9 B parameters) with a
small trained tokenizer, saved as a checkpoint the transformers backend loads:
enough to keep a GPU busy generating, with nothing downloaded.

    python scripts/gpu/random_model.py OUT_DIR
"""

import sys

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast


def main(out: str) -> int:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    corpus = ["def forward(self, x): return torch.relu(self.linear(x))", "__global__ void kernel(float* y) {}"] * 50
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out)
    config = LlamaConfig(vocab_size=fast.vocab_size, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=4096,
                         bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = None  # never stop early: keep the GPU busy for max_tokens
    model.save_pretrained(out)
    print(f"{out}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, vocab {fast.vocab_size}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
