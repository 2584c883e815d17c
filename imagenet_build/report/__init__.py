"""`imagenet-build report`: one self-contained HTML page picturing a build (docs/report.md).

records.py reads records by their DALI index, only the part a page needs; page_sample.py chooses which;
figures.py gathers what the folder says of itself (manifest, verify.json, trainer-check.json);
thumbs.py and charts.py draw (charts.py alone imports matplotlib, the `report` extra); page.py
writes the HTML; report_run.py puts them together.
"""

PER_CLASS = 8  # --per-class's default: thumbnails in each class's contact sheet (the command line's and the API's)
