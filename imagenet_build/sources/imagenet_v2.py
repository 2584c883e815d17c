"""ImageNetV2 (Recht et al., ICML 2019; github.com/modestyachts/ImageNetV2) for --from: three variants of 10,000.

`imagenetv2-matched-frequency.tar.gz`, `imagenetv2-threshold0.7.tar.gz`, `imagenetv2-top-images.tar.gz`
(TFDS's builder names the last `imagenetv2-topimages.tar.gz`), each holding
`imagenetv2-<variant>-format-val/<class number>/<name>.jpeg` (TFDS names the threshold one's folder
`imagenetv2-threshold-0.7-format-val`; before its 1.0.0, in 2020, the archive's own name without
`.tar.gz`: `imagenetv2-matched-frequency/`), 10 images for each of the 1000 classes: the class
number is the synset's index in the sorted list of the 1000 synsets. Given as the archive, its
extracted folder, or a folder holding either; one variant at a time (each its own output folder).
The variant is the one its top folder names, which must be the one the archive's name says.
image/filename is `<class number>/<name>.jpeg`. The shared rules: eval_sets.py.
"""

from __future__ import annotations

from imagenet_build.sources.eval_sets import EvalSet, register_set

VARIANTS = ("matched-frequency", "threshold-0.7", "top-images")
IMAGENET_V2 = EvalSet(
    name="ImageNetV2",
    short="imagenet-v2",
    archives={"imagenetv2-matched-frequency.tar.gz": VARIANTS[0], "imagenetv2-threshold0.7.tar.gz": VARIANTS[1],
              "imagenetv2-top-images.tar.gz": VARIANTS[2], "imagenetv2-topimages.tar.gz": VARIANTS[2]},
    tops={"imagenetv2-matched-frequency-format-val": VARIANTS[0], "imagenetv2-threshold0.7-format-val": VARIANTS[1],
          "imagenetv2-threshold-0.7-format-val": VARIANTS[1], "imagenetv2-top-images-format-val": VARIANTS[2],
          # TFDS's builder before its 1.0.0 (2020): the archives' own names
          "imagenetv2-matched-frequency": VARIANTS[0], "imagenetv2-threshold0.7": VARIANTS[1],
          "imagenetv2-topimages": VARIANTS[2]},
    images=10000,
    suffix=".jpeg",
    rank=5,
    numbered=True,
)

register_set(IMAGENET_V2)
