"""Every reader's default normalisation, one home: the readers, trainer-check and the command's help take it."""

# The ImageNet normalisation of NVIDIA's Deep Learning Examples (0-255 units)
DLE_MEAN = (123.68, 116.28, 103.53)
DLE_STD = (58.395, 57.120, 57.385)
