"""A generated section of docs/benchmarks.md, between HTML-comment markers, so that one
benchmark's report can replace its own section and keep the others'.

    text = marked_section.replace(text, BEGIN, END, section)   # or appended at the end
    old = marked_section.find(text, BEGIN, END)                # the section, or None
"""


def _span(text, begin, end):
    start = text.find(begin)
    if start < 0:
        return None
    stop = text.find(end, start)
    return start, len(text) if stop < 0 else stop + len(end)


def find(text, begin, end):
    """The section between (and with) the markers, or None."""
    span = _span(text, begin, end)
    return text[span[0]:span[1]] + "\n" if span else None


def replace(text, begin, end, section):
    """text with its marked section replaced by `section` (which carries the markers),
    or with `section` appended."""
    span = _span(text, begin, end)
    if span is None:
        return text.rstrip("\n") + "\n\n" + section
    rest = text[span[1]:].lstrip("\n")
    return text[:span[0]] + section + ("\n" + rest if rest else "")
