"""ImageNet-Sketch (Wang et al., NeurIPS 2019; github.com/HaohanWang/ImageNet-Sketch) for --from: 50,889 sketches.

`ImageNet-Sketch.zip` (7.6 GB, read in place), holding `sketch/<synset>/<name>.JPEG`, about 50 for
each of the 1000 classes (TFDS's `imagenet_sketch` reads the same zip). Given as the zip, its
extracted `sketch` folder, or a folder holding either. image/filename is `<synset>/<name>.JPEG`
(TFDS's file_name). The parquet copy on the Hugging Face hub is not read: convert the zip. The
shared rules: eval_sets.py.
"""

from __future__ import annotations

from imagenet_build.sources.eval_sets import EvalSet, register_set

IMAGENET_SKETCH = EvalSet(
    name="ImageNet-Sketch",
    short="imagenet-sketch",
    archives={"ImageNet-Sketch.zip": ""},
    tops={"sketch": ""},
    images=50889,
    suffix=".JPEG",
    rank=8,
)

register_set(IMAGENET_SKETCH)
