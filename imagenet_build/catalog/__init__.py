"""What the classes are: synsets, texts, validation labels, subsets, bounding boxes."""
