"""Tiny real transformers folders for the nli Checker: a BertForSequenceClassification set by hand.

The model behaves as :func:`tests.adapters.nli_models.build_model`'s ONNX graph: an entail word
anywhere in the pair gives entailment logit ``yes`` (default 4), "no" gives contradiction logit
4, neutral has a bias of 1. How: every token embedding is one of three patterns (entail word,
"no", other) that LayerNorm maps to ±√2 on two of six dimensions; one layer whose queries and keys
are zero attends uniformly over the unmasked tokens, so [CLS]'s attention output is the mean
embedding, positive on the entail dimension exactly when an entail word is present; the
feed-forward block is zero; the pooler's tanh of 1e4 × that dimension is then 1 or 0, and the
classifier mixes it into the labels' logits as the ONNX graph does. Padding is masked, so a
batch gives each pair the logits it gets alone. The tokenizer is nli_models' WordLevel one
wrapped as a PreTrainedTokenizerFast; both are written by ``save_pretrained``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    PreTrainedTokenizerFast,
)

from tests.adapters.nli_models import NLI_LABELS, SPECIAL, WORDS

#: Embedding dimensions: entail word +/-, "no" +/-, any other token +/-.
_HIDDEN = 6


def build_bert(folder: Path, *, labels: dict[str, str] | None = None, yes: float = 4.0, window: int = 512,
               entail_words: tuple[str, ...] = ("yes",), safetensors: bool = True,
               extra: dict[str, object] | None = None) -> Path:
    """Write a transformers folder (config.json, model.safetensors or pytorch_model.bin, tokenizer
    files) into ``folder`` and return it.

    ``labels`` is config.json's id2label (default three-label NLI), mapped to logits as in
    ``build_model``; ``window`` is config.json's ``max_position_embeddings``; ``extra`` is added
    to config.json after saving.
    """
    labels = labels or NLI_LABELS
    vocab = {w: i for i, w in enumerate((*SPECIAL, *WORDS))}
    config = BertConfig(vocab_size=len(vocab), hidden_size=_HIDDEN, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=2, max_position_embeddings=window, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0,
                        id2label={int(k): v for k, v in labels.items()},
                        label2id={v: int(k) for k, v in labels.items()})
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    names = [labels[str(i)] for i in range(len(labels))]
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for norm in (model.bert.embeddings.LayerNorm, model.bert.encoder.layer[0].attention.output.LayerNorm,
                     model.bert.encoder.layer[0].output.LayerNorm):
            norm.weight.fill_(1.0)
        words = model.bert.embeddings.word_embeddings.weight
        words[:, 4], words[:, 5] = 1.0, -1.0
        for word in entail_words:
            words[vocab[word]] = torch.tensor([1.0, -1.0, 0, 0, 0, 0])
        words[vocab["no"]] = torch.tensor([0, 0, 1.0, -1.0, 0, 0])
        attention = model.bert.encoder.layer[0].attention
        attention.self.value.weight.copy_(torch.eye(_HIDDEN))
        attention.output.dense.weight.copy_(torch.eye(_HIDDEN))
        model.bert.pooler.dense.weight[0, 0] = model.bert.pooler.dense.weight[1, 2] = 1e4
        head = model.classifier
        for j, name in enumerate(n.lower() for n in names):
            if name in ("entailment", "supported", "label_1"):
                head.weight[j, 0] = yes
            elif name == "contradiction":
                head.weight[j, 1] = 4.0
            elif name == "neutral":
                head.bias[j] = 1.0
            else:  # unsupported, LABEL_0: neutral and contradiction in one
                head.weight[j, 1], head.bias[j] = 4.0, 1.0
    model.save_pretrained(folder)
    if not safetensors:  # the older format, which save_pretrained no longer writes
        (folder / "model.safetensors").unlink()
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]").save_pretrained(folder)
    if extra:
        data = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**data, **extra}))
    return folder
