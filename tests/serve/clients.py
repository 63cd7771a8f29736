"""The real clients against a running `st5 serve` (tests/serve.rs runs this).

Usage: clients.py URL SENTENCES_JSON. Prints, as JSON, the rows each client got back:
- the `openai` package with `base_url`, asking for floats and with its default (base64, which
  the client decodes itself);
- `huggingface_hub`'s `InferenceClient(base_url=URL).feature_extraction`, which posts to `/`.
"""

import json
import sys

import numpy as np
from huggingface_hub import InferenceClient
from openai import OpenAI


def main() -> None:
    url, sentences = sys.argv[1], json.loads(sys.argv[2])
    client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    out = {}
    floats = client.embeddings.create(input=sentences, model="st5", encoding_format="float")
    out["openai_float"] = [d.embedding for d in floats.data]
    default = client.embeddings.create(input=sentences, model="st5")
    out["openai_base64"] = [list(map(float, d.embedding)) for d in default.data]
    hf = InferenceClient(base_url=url)
    out["huggingface_hub"] = [
        np.asarray(hf.feature_extraction(s, normalize=True), dtype=np.float32).reshape(-1).tolist()
        for s in sentences
    ]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
